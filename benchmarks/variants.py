"""Variant-scoring throughput and memory on CPU: `genolong score-variants`, end to end.

Variants are random SNVs (seeded, REF read from the genome) in the real hg19 chr17 fragment
shipped with genolong, written as a VCF. Each speed case runs the real command in this process
(VCF reading, REF check, windows, tokenizing, batching, the model, the output) on ``--threads``
torch threads; the command's modules are imported before the clock starts (a one-time cost of
any process, several seconds for Lightning), model loading is timed:

* chromatin, 8 kb: the ``chromatin_tiny`` architecture (random weights, as in
  ``benchmarks/predict.py``), all 919 profiles to HDF5, with and without ``--rc``;
* promoter: the shipped default model, to TSV, with and without ``--rc``.

On a machine shared with other jobs the wall time says little: the CPU seconds of the process
(all threads) and the load average (before and after each case) are reported beside it.

Memory: ``--memory-sizes`` variants go through a fresh process each, one torch thread, to TSV;
its peak RSS (read from the kernel: it includes torch and the model, so it is set before scoring
starts) and the peak of the Python allocations traced during the run (strings, numpy arrays) are
reported; constant memory in the number of variants shows as flat columns. Memory flatness is
a property of the streaming (reading, chunking, writing), not of the network, so the series
runs a model small enough for 100,000 variants to finish in minutes on a shared CPU:
``--memory-model tiny`` (default: the ``promoter_tiny`` preset cut to one layer of width 16 on
the chromatin model's BPE tokenizer, 300-bp windows, random weights) or ``promoter`` (the
shipped model).

Usage::

    python benchmarks/variants.py --threads 1 --out scratch/bench_variants
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predict import chromatin_model  # noqa: E402 (the benchmarks folder is not a package)

import genolong.inference.variants.run  # noqa: E402, F401 (imported before any clock starts)
from genolong.classifier.directory import Classifier, TaskInfo, default_promoter_model  # noqa: E402
from genolong.cli.main import main as genolong_main  # noqa: E402
from genolong.dna.sequence import read_fasta  # noqa: E402
from genolong.dna.tokenizer import load_tokenizer  # noqa: E402
from genolong.resources import sample_genome  # noqa: E402
from genolong.tasks.task import load_finetune_config  # noqa: E402
from genolong.training.model_setup import build_classifier_model  # noqa: E402

#: The memory series' tiny model: ``promoter_tiny`` cut down (one layer of width 16, 64 tokens).
TINY = {"max_len": 64, "model.hidden_size": 16, "model.num_hidden_layers": 1, "model.num_attention_heads": 2,
        "model.intermediate_size": 32}


def write_snvs(path: Path, count: int, margin: int = 4000, seed: int = 0) -> Path:
    """``count`` random SNVs of chr17_part at least ``margin`` bp from its ends, as a VCF."""
    sequence = next(r.sequence for r in read_fasta(sample_genome()) if r.name == "chr17_part")
    rng = np.random.default_rng(seed)
    positions = np.sort(rng.integers(margin, len(sequence) - margin, count))
    lines = ["##fileformat=VCFv4.2", f"##contig=<ID=chr17_part,length={len(sequence)}>",
             "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    for i, position in enumerate(positions):
        ref = sequence[position]
        alt = "ACGT"[("ACGT".index(ref) + 1 + i % 3) % 4]
        lines.append(f"chr17_part\t{position + 1}\tv{i}\t{ref}\t{alt}\t.\t.\t.")
    path.write_text("\n".join(lines) + "\n")
    return path


def tiny_model(work: Path, tokenizer_dir: Path) -> Path:
    """A 300-bp promoter classifier of the :data:`TINY` size (random weights) on the BPE
    tokenizer saved in ``tokenizer_dir``."""
    config = load_finetune_config("promoter", "promoter_tiny", TINY)
    tokenizer = load_tokenizer(tokenizer_dir)
    torch.manual_seed(0)
    model = build_classifier_model(config, 1, tokenizer, None)
    info = TaskInfo("promoter", 300, 300, config.max_len, ["promoter"], threshold=0.5)
    Classifier(model, tokenizer, info, device="cpu").save(work / "tiny_model")
    return work / "tiny_model"


def score_command(vcf: Path, model: Path, out: Path, *options: str) -> list[str]:
    return ["score-variants", "--vcf", str(vcf), "--genome", str(sample_genome()), "--model", str(model),
            "--out", str(out), "--accelerator", "cpu", *options]


def run_case(vcf: Path, model: Path, out: Path, count: int, *options: str) -> dict:
    """One timed score-variants run in this process: wall and CPU seconds, the load around it."""
    load_before = os.getloadavg()[0]
    started, cpu_started = time.perf_counter(), time.process_time()
    if genolong_main(score_command(vcf, model, out, *options)) != 0:
        raise SystemExit(f"score-variants {vcf} {model} {options} failed")
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    return {"variants": count, "seconds": round(seconds, 2), "variants_per_s": round(count / seconds, 1),
            "cpu_seconds": round(cpu_seconds, 2), "variants_per_cpu_s": round(count / cpu_seconds, 1),
            "load": f"{load_before:.1f}-{os.getloadavg()[0]:.1f}"}


def peak_memory(vcf: Path, model: Path, out: Path) -> dict:
    """Peak RSS of one score-variants run in a fresh one-thread process (its own ``ru_maxrss``), the
    peak of the Python allocations (numpy included) made while it scores, both in MB, and its CPU seconds."""
    code = ("import resource, sys, tracemalloc, torch; torch.set_num_threads(1); from genolong.cli.main import main; "
            f"tracemalloc.start(); code = main({score_command(vcf, model, out)!r}); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, tracemalloc.get_traced_memory()[1]); "
            "raise SystemExit(code)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code], check=True, stderr=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          text=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_kb, traced = done.stdout.split()[-2:]
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"peak_rss_mb": round(int(rss_kb) / 1024, 1), "traced_peak_mb": round(int(traced) / 2**20, 1),
            "cpu_seconds": round(cpu, 1)}


def speed_cases(args, work: Path, chromatin: Path) -> dict:
    speed = {}
    batch = ["--batch-size", str(args.batch_size)]
    if args.chromatin:
        vcf = write_snvs(work / "chromatin.vcf", args.chromatin)
        for rc in ([], ["--rc"]):
            speed[f"chromatin_tiny, 8 kb, 919 profiles{' --rc' if rc else ''}"] = run_case(
                vcf, chromatin, work / "c.h5", args.chromatin, *batch, *rc)
    if args.promoter:
        vcf = write_snvs(work / "promoter.vcf", args.promoter)
        for rc in ([], ["--rc"]):
            speed[f"promoter (shipped), 300 bp{' --rc' if rc else ''}"] = run_case(
                vcf, default_promoter_model(), work / "p.tsv", args.promoter, *batch, *rc)
    return speed


def report(args, speed: dict, memory: dict, memory_model: str) -> str:
    lines = [f"score-variants, {args.threads} torch threads, batch {args.batch_size}, CPU "
             "(imports excluded, model loading included)", "",
             "| case | variants | seconds | variants/s | CPU seconds | variants per CPU second | load average |",
             "|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {name} | {r['variants']} | {r['seconds']} | {r['variants_per_s']} | {r['cpu_seconds']} | "
              f"{r['variants_per_cpu_s']} | {r['load']} |" for name, r in speed.items()]
    if memory:
        lines += ["", f"Memory, one fresh process per size, 1 thread, model `{memory_model}` (memory is the "
                  "streaming's: reading, chunks, writing; not the network's)", "",
                  "| variants | peak RSS (MB) | peak Python allocations while scoring (MB) | CPU seconds |",
                  "|---:|---:|---:|---:|"]
        lines += [f"| {size:,} | {m['peak_rss_mb']} | {m['traced_peak_mb']} | {m['cpu_seconds']} |"
                  for size, m in memory.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the speed cases (default: 2)")
    parser.add_argument("--batch-size", type=int, default=32, help="score-variants --batch-size (default: 32)")
    parser.add_argument("--chromatin", type=int, default=600, help="variants for the chromatin cases (0: none)")
    parser.add_argument("--promoter", type=int, default=2000, help="variants for the promoter cases (0: none)")
    parser.add_argument("--memory-sizes", type=int, nargs="*", default=[1000, 10_000, 100_000],
                        help="variants per memory run (none: no memory series)")
    parser.add_argument("--memory-model", choices=("tiny", "promoter"), default="tiny",
                        help="model of the memory series (module docstring; default: tiny)")
    parser.add_argument("--out", type=Path, default=None, help="directory for variants.md and variants.json")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    memory = {}
    with tempfile.TemporaryDirectory(prefix="bench_variants.") as tmp:
        work = Path(tmp)
        chromatin = chromatin_model(work)
        speed = speed_cases(args, work, chromatin)
        print(json.dumps(speed), flush=True)  # as it comes: the memory runs are long
        model = tiny_model(work, chromatin) if args.memory_model == "tiny" else default_promoter_model()
        for size in args.memory_sizes:
            memory[size] = peak_memory(write_snvs(work / f"m{size}.vcf", size), model, work / f"m{size}.tsv")
            print(f"{size} variants: {memory[size]}", flush=True)
    table = report(args, speed, memory, args.memory_model)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "variants.md").write_text(table + "\n")
        (args.out / "variants.json").write_text(json.dumps(
            {"threads": args.threads, "batch_size": args.batch_size, "speed": speed,
             "memory_model": args.memory_model, "memory": memory}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
