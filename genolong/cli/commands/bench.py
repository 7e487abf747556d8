"""``genolong bench attention``: our backbones vs transformers' BigBird, Longformer and BERT."""

from __future__ import annotations

import argparse
from pathlib import Path

from genolong.cli.arguments import add_precision_argument, positive_float, positive_int, precision_choice
from genolong.cli.outputs import OutputDirectory, declare
from genolong.runtime.precision import resolve_precision

DEFAULT_LENGTHS = [1024, 2048, 4096, 8192, 16384]
DEFAULT_EXTRA_LENGTHS = [32768, 65536]


def register(subparsers) -> None:
    group = subparsers.add_parser("bench", help="benchmarks")
    commands = group.add_subparsers(dest="bench_command", metavar="SUBCOMMAND", required=True)
    attention = commands.add_parser(
        "attention",
        help="forward / MLM training-step time and peak memory vs length, ours and transformers' peers",
        description="Each model and length runs in a fresh process (batch 1). Writes OUT/attention_DTYPE.csv, "
        ".md (tables), .png (log-log plot) and .json (settings, machine, load).",
    )
    _add_model_arguments(attention.add_argument_group("models"))
    _add_size_arguments(attention.add_argument_group("model size (every model)"))
    _add_measurement_arguments(attention.add_argument_group("measurements"))
    attention.add_argument("--out", type=Path, default=Path("runs/bench"))
    attention.add_argument("--resume", action="store_true",
                           help="keep the measurements already in OUT/attention_DTYPE.csv and run the rest")
    declare(attention, run_attention, inputs=["legacy_site"], directories={"out": OutputDirectory("bench")})
    _register_gpu(commands)


def _register_gpu(commands) -> None:
    gpu = commands.add_parser(
        "gpu",
        help="check a CUDA machine end to end: gpu tests, flex vs dense reference, training, inference, speed",
        description="Runs the gpu-marked tests, flex block-sparse attention against the dense float64 reference "
        "(4K-64K tokens, bf16 and fp32, forward and backward), 20 bf16 training steps of every backbone, "
        "genolong pretrain on the GPU, predict/scan/score-variants on GPU vs CPU, and a speed table of base-size "
        "models (ours vs transformers' BigBird vs dense SDPA) and of the converted published models (DNABERT-2, "
        "ModernBERT, made long with LSG) against their sources, and the model FLOPs utilisation (MFU) of base-size "
        "training steps at 4K-64K tokens and batch 1/4/16 with the longest context one step fits. Each section "
        "runs in its own process within a time budget (540 s in all on a GPU); one over its budget is stopped "
        "and reported, its finished rows kept. Writes OUT/device_check.md and .json (after every section). "
        "Exit status 1 when a check fails. --cpu runs the same logic at tiny sizes on the CPU.",
    )
    gpu.add_argument("--out", type=Path, default=Path("runs/gpu_check"))
    gpu.add_argument("--cpu", action="store_true", help="tiny sizes on the CPU (checks the script, not a GPU)")
    gpu.add_argument("--sections", nargs="+", default=None, metavar="NAME",
                     help="tests train pretrain inference kernels published speed utilisation (default: all, in this order)")
    gpu.add_argument("--lengths", nargs="+", type=positive_int, default=None, metavar="N",
                     help="speed-table lengths (default: 4096 8192 16384 32768 65536)")
    gpu.add_argument("--kernel-lengths", nargs="+", type=positive_int, default=None, metavar="N",
                     help="lengths of the flex vs dense reference check (default: 4096 16384 65536)")
    gpu.add_argument("--tests", type=Path, default=Path("tests"),
                     help="the checkout's tests directory, for the gpu-marked tests (default: ./tests)")
    declare(gpu, run_gpu, inputs=["tests"], directories={"out": OutputDirectory("bench")})


def _add_model_arguments(group) -> None:
    group.add_argument("--backbones", nargs="*", default=None, metavar="NAME",
                       help="our backbones (default: every registered attention; none with an empty list)")
    group.add_argument(
        "--peers", nargs="*", default=None, metavar="NAME",
        help="peers: hf-bigbird hf-longformer hf-bert (installed transformers), hf4-bigbird lsg-bert "
        "(transformers 4.x from --legacy-site), and on request hf-esm, hf-modernbert, hf-ntv2 (ESM with NT v2's "
        "SwiGLU), ref-dnabert2 (DNABERT-2's architecture in plain PyTorch) and the genolong conversions of these "
        "models with the same weights: converted-bigbird converted-bert converted-esm converted-modernbert "
        "converted-ntv2 converted-dnabert2, and made long with LSG (from 512 / 1,024 / 2,048 trained "
        "positions): lsg-dnabert2 lsg-modernbert lsg-ntv2; "
        "default: all that can run, except the ones on request")
    group.add_argument(
        "--legacy-site", type=Path, default=None, metavar="DIR",
        help="package directory with transformers 4.x (4.44 tested) and lsg-converter, put first on the "
        "PYTHONPATH of the hf4-bigbird and lsg-bert workers")
    group.add_argument("--no-floor", dest="floor", action="store_false",
                       help="skip our model with the attention skipped (the floor)")


def _add_measurement_arguments(group) -> None:
    group.add_argument("--lengths", nargs="+", type=positive_int, default=DEFAULT_LENGTHS, metavar="N")
    group.add_argument("--extra-lengths", nargs="*", type=positive_int, default=DEFAULT_EXTRA_LENGTHS,
                       metavar="N",
                       help="lengths for our sparse backbones and the floor only (default: %(default)s)")
    group.add_argument("--phases", nargs="+", choices=["forward", "train"], default=["forward", "train"])
    add_precision_argument(group)
    # the former name, in the commands of the measurements recorded in docs/results/attention.md
    group.add_argument("--dtype", dest="precision", type=precision_choice, help=argparse.SUPPRESS)
    group.add_argument("--threads", type=positive_int, default=2)
    group.add_argument("--repeats", type=positive_int, default=3, help="timed calls after the untimed first one")
    group.add_argument("--budget", type=positive_float, default=30.0,
                       help="fewer repeats once the timed calls took this many seconds")
    group.add_argument("--timeout", type=positive_float, default=1200, help="seconds per model and length")
    group.add_argument("--max-memory-gb", type=positive_float, default=12,
                       help="kill a measurement whose resident set grows past this")


def _add_size_arguments(group) -> None:
    for flag, default in (("--hidden", 256), ("--layers", 4), ("--heads", 4), ("--ffn", 1024), ("--vocab", 32000)):
        group.add_argument(flag, type=positive_int, default=default)


def run_attention(args) -> None:
    from genolong.experiments.bench.attention import BenchSize, Spec  # torch: imported when the command runs
    from genolong.experiments.bench.runner import run_attention_benchmark

    size = BenchSize(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                     num_attention_heads=args.heads, intermediate_size=args.ffn)
    template = Spec(model="", length=0, size=size,
                    dtype="bf16" if resolve_precision(args.precision, gpu=False) == "bf16-mixed" else "fp32",
                    threads=args.threads, repeats=args.repeats, budget_s=args.budget, phases=tuple(args.phases),
                    legacy_site=None if args.legacy_site is None else str(args.legacy_site.resolve()))
    stem = run_attention_benchmark(args.out, template, backbones=args.backbones, peers=args.peers,
                                   floor=args.floor, lengths=args.lengths, extra_lengths=args.extra_lengths,
                                   timeout_s=args.timeout, max_memory_gb=args.max_memory_gb, resume=args.resume)
    print(f"wrote {stem}.csv, .md, .png, .json")


def run_gpu(args) -> int:
    from dataclasses import replace

    from genolong.core.errors import UserError
    from genolong.experiments.bench.device_check import (
        SECTIONS,
        cpu_plan,
        failures,
        gpu_plan,
        run_check,
        stopped,
    )

    sections = tuple(args.sections or SECTIONS)
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise UserError(f"unknown section {', '.join(unknown)}; choose from: {', '.join(SECTIONS)}")
    if args.cpu:
        plan = cpu_plan()
    else:
        from genolong.runtime.devices import cuda_available  # torch: only for a GPU run

        if not cuda_available():
            raise UserError("genolong bench gpu: this machine has no CUDA GPU", hint="use --cpu to check the script")
        plan = gpu_plan(tuple(args.lengths)) if args.lengths else gpu_plan()
    if args.lengths and args.cpu:
        plan = replace(plan, speed=replace(plan.speed, lengths=tuple(args.lengths)))
    if args.kernel_lengths:
        plan = replace(plan, kernel_lengths=tuple(args.kernel_lengths))
    plan = replace(plan, sections=sections, tests_dir=args.tests.resolve() if args.tests.is_dir() else None)
    results = run_check(plan, args.out)
    failed = failures(results)
    for line in failed:
        print(f"FAILED {line}")
    for line in stopped(results):
        print(f"INCOMPLETE {line}")
    print(f"wrote {args.out / 'device_check.md'} and .json; {len(failed)} failed checks")
    return 1 if failed else 0
