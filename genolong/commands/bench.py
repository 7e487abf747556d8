"""``genolong bench attention``: our backbones vs transformers' BigBird, Longformer and BERT."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

from genolong.commands.arguments import positive_float, positive_int
from genolong.outputs import OutputDirectory, declare

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
    attention.add_argument(
        "--backbones",
        nargs="*",
        default=None,
        metavar="NAME",
        help="our backbones (default: every registered attention; none with an empty list)",
    )
    attention.add_argument(
        "--peers",
        nargs="*",
        default=None,
        metavar="NAME",
        help="peers: hf-bigbird hf-longformer hf-bert (installed transformers), hf4-bigbird lsg-bert "
        "(transformers 4.x from --legacy-site), and on request hf-esm and the genolong conversions of "
        "transformers' models with the same weights: converted-bigbird converted-bert converted-esm; "
        "default: all that can run, except the ones on request",
    )
    attention.add_argument(
        "--legacy-site",
        type=Path,
        default=None,
        metavar="DIR",
        help="package directory with transformers 4.x (4.44 tested) and lsg-converter, put first on the "
        "PYTHONPATH of the hf4-bigbird and lsg-bert workers",
    )
    attention.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip our model with the attention skipped (the floor)",
    )
    attention.add_argument("--lengths", nargs="+", type=positive_int, default=DEFAULT_LENGTHS, metavar="N")
    attention.add_argument(
        "--extra-lengths",
        nargs="*",
        type=positive_int,
        default=DEFAULT_EXTRA_LENGTHS,
        metavar="N",
        help="lengths for our sparse backbones and the floor only (default: %(default)s)",
    )
    attention.add_argument("--phases", nargs="+", choices=["forward", "train"], default=["forward", "train"])
    attention.add_argument(
        "--dtype",
        choices=["auto", "fp32", "bf16"],
        default="auto",
        help="bf16 = torch.autocast(bfloat16) for every model; auto = bf16 only on a CPU with native bf16 "
        "(avx512_bf16/amx_bf16) where it measures faster, else fp32",
    )
    attention.add_argument("--threads", type=positive_int, default=2)
    attention.add_argument("--repeats", type=positive_int, default=3, help="timed calls after the untimed first one")
    attention.add_argument(
        "--budget", type=positive_float, default=30.0, help="fewer repeats once the timed calls took this many seconds"
    )
    attention.add_argument("--hidden", type=positive_int, default=256)
    attention.add_argument("--layers", type=positive_int, default=4)
    attention.add_argument("--heads", type=positive_int, default=4)
    attention.add_argument("--ffn", type=positive_int, default=1024)
    attention.add_argument("--vocab", type=positive_int, default=32000)
    attention.add_argument("--timeout", type=positive_float, default=1200, help="seconds per model and length")
    attention.add_argument(
        "--max-memory-gb",
        type=positive_float,
        default=12,
        help="kill a measurement whose resident set grows past this",
    )
    attention.add_argument("--out", type=Path, default=Path("runs/bench"))
    attention.add_argument(
        "--resume",
        action="store_true",
        help="keep the measurements already in OUT/attention_DTYPE.csv and run the rest",
    )
    attention.set_defaults(func=run_attention)
    declare(attention, inputs=["legacy_site"], directories={"out": OutputDirectory("bench")})


def run_attention(args) -> int:
    import torch
    import transformers

    from genolong.attention import attention_class, available_attentions
    from genolong.bench import attention as attention_bench
    from genolong.bench import report as bench_report
    from genolong.bench.cpu_precision import matmul_rates, resolve_cpu_dtype
    from genolong.errors import UserError

    backbones = available_attentions() if args.backbones is None else args.backbones
    for name in backbones:
        attention_class(name)  # ConfigError for an unknown name
    known_peers = attention_bench.PEERS + attention_bench.LEGACY_PEERS + attention_bench.OPTIONAL_PEERS
    if args.peers is None:
        peers = list(attention_bench.PEERS + (attention_bench.LEGACY_PEERS if args.legacy_site else ()))
    else:
        peers = args.peers
    unknown = sorted(set(peers) - set(known_peers))
    if unknown:
        raise UserError(f"unknown peer {', '.join(unknown)}; choose from: {', '.join(known_peers)}")
    if args.legacy_site is not None and not (args.legacy_site / "transformers").is_dir():
        raise UserError(f"--legacy-site {args.legacy_site}: no transformers package in that directory")

    args.dtype = resolve_cpu_dtype(args.dtype)
    size = attention_bench.BenchSize(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.ffn,
    )
    template = attention_bench.Spec(
        model="",
        length=0,
        size=size,
        dtype=args.dtype,
        threads=args.threads,
        repeats=args.repeats,
        budget_s=args.budget,
        phases=tuple(args.phases),
        legacy_site=None if args.legacy_site is None else str(args.legacy_site.resolve()),
    )
    stem = args.out / f"attention_{args.dtype}"
    settings = {
        "size": vars(size),
        "threads": args.threads,
        "repeats": args.repeats,
        "budget_s": args.budget,
        "dtype": args.dtype,
    }
    meta_path = stem.with_suffix(".json")
    if args.resume and meta_path.exists() and json.loads(meta_path.read_text())["settings"] != settings:
        raise UserError(f"{meta_path} was measured with other settings; use another --out or drop --resume")
    meta = {
        "settings": settings,
        "command": " ".join(["genolong", *sys.argv[1:]]),
        "machine": {
            "cpu": _cpu_name(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "fp32_gemm_gflops": round(matmul_rates().fp32, 1),
        },
        "load_average_start": os.getloadavg(),
    }
    pairs = attention_bench.plan(backbones, peers, args.floor, args.lengths, args.extra_lengths)
    attention_bench.check_plan(pairs, size)
    print(
        f"{len(pairs)} model/length pairs, {args.threads} threads, {args.dtype}, size {vars(size)}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )

    def progress(row) -> None:
        if row.get("status") == "ok":
            print(
                f"  {row['model']:>14} {row['length']:>6} {row['phase']:>7}: {row['time_s']:8.3f} s  "
                f"peak {row['peak_mb']:8.0f} MB  (first call {row['first_call_s']:.2f} s, load {row['load1']:.1f})"
            )
        else:
            print(f"  {row['model']:>14} {row['length']:>6} {row['phase']:>7}: {row['status']}")

    rows = attention_bench.run_benchmark(
        pairs,
        template,
        stem.with_suffix(".csv"),
        timeout_s=args.timeout,
        max_memory_gb=args.max_memory_gb,
        resume=args.resume,
        progress=progress,
    )
    meta["load_average_end"] = os.getloadavg()
    from genolong.files import atomic_write_text

    atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
    report = bench_report.markdown_report(rows)
    atomic_write_text(stem.with_suffix(".md"), report)
    title = (
        f"{args.layers} layers, hidden {args.hidden}, {args.heads} heads, FFN {args.ffn}; batch 1, "
        f"{args.threads} threads, {args.dtype}"
    )
    bench_report.plot(stem.with_suffix(".png"), rows, title)
    print(report)
    print(f"wrote {stem}.csv, .md, .png, .json")
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
