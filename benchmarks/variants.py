"""Variant-scoring throughput and memory on CPU: `genolong score-variants`, end to end.

Variants are random SNVs (seeded, REF read from the genome) in the real hg19 chr17 fragment
shipped with genolong, written as a VCF. Each speed case runs the real command in this process
(VCF reading, REF check, windows, tokenizing, batching, the model, the TSV) on ``--threads``
torch threads:

* chromatin, 8 kb: the ``chromatin_tiny`` architecture (random weights, as in
  ``benchmarks/predict.py``), all 919 profiles to HDF5, with and without ``--rc``;
* promoter, 251 bp: the shipped default model, to TSV, with and without ``--rc``.

Memory: the promoter case runs in a fresh process per size (``--memory-sizes``); its peak RSS
(read from the kernel: it includes torch and the model, so it is set before scoring starts) and
the peak of the Python allocations traced during the run (strings, numpy arrays) are reported;
constant memory in the number of variants shows as flat columns. On a loaded machine the wall
time says little: the CPU seconds of the process (all threads) are reported beside it.

Usage::

    python benchmarks/variants.py --threads 2 --out scratch/bench_variants
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from predict import chromatin_model  # noqa: E402 (the benchmarks folder is not a package)

from genolong.dna.sequence import read_fasta  # noqa: E402
from genolong.resources import sample_genome  # noqa: E402


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


def run_case(vcf: Path, model: Path, out: Path, count: int, *options: str) -> dict:
    from genolong.cli import main

    command = ["score-variants", "--vcf", str(vcf), "--genome", str(sample_genome()), "--model", str(model),
               "--out", str(out), "--accelerator", "cpu", *options]
    started, cpu_started = time.perf_counter(), time.process_time()
    if main(command) != 0:
        raise SystemExit(f"{' '.join(command)} failed")
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    return {"variants": count, "seconds": round(seconds, 2), "variants_per_s": round(count / seconds, 1),
            "cpu_seconds": round(cpu_seconds, 2), "variants_per_cpu_s": round(count / cpu_seconds, 1)}


def peak_memory(vcf: Path, model: Path, out: Path, threads: int) -> tuple[float, float]:
    """Peak RSS of one score-variants run in a fresh process (its own ``ru_maxrss``) and the peak of
    the Python allocations (numpy included) made while it scores, both in MB."""
    code = (f"import resource, tracemalloc, torch; torch.set_num_threads({threads}); from genolong.cli import main; "
            "tracemalloc.start(); "
            f"code = main(['score-variants', '--vcf', '{vcf}', '--genome', '{sample_genome()}', "
            f"'--model', '{model}', '--out', '{out}', '--accelerator', 'cpu']); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, tracemalloc.get_traced_memory()[1]); "
            "raise SystemExit(code)")
    done = subprocess.run([sys.executable, "-c", code], check=True, stderr=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          text=True)
    rss_kb, traced = done.stdout.split()[-2:]
    return round(int(rss_kb) / 1024, 1), round(int(traced) / 2**20, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    parser.add_argument("--chromatin", type=int, default=300, help="variants for the chromatin cases")
    parser.add_argument("--promoter", type=int, default=1000, help="variants for the promoter cases")
    parser.add_argument("--memory-sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--out", type=Path, default=None, help="directory for variants.md and variants.json")
    args = parser.parse_args(argv)

    import torch

    from genolong.inference.classifier import default_promoter_model

    torch.set_num_threads(args.threads)
    speed, memory = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench_variants.") as tmp:
        work = Path(tmp)
        chromatin = chromatin_model(work)
        vcf = write_snvs(work / "chromatin.vcf", args.chromatin)
        for rc in ([], ["--rc"]):
            speed[f"chromatin_tiny, 8 kb, 919 profiles{' --rc' if rc else ''}"] = run_case(
                vcf, chromatin, work / "c.h5", args.chromatin, *rc)
        vcf = write_snvs(work / "promoter.vcf", args.promoter)
        for rc in ([], ["--rc"]):
            speed[f"promoter (shipped), 251 bp{' --rc' if rc else ''}"] = run_case(
                vcf, default_promoter_model(), work / "p.tsv", args.promoter, *rc)
        print(json.dumps(speed), flush=True)  # as it comes: the memory runs are long
        for size in args.memory_sizes:
            memory[size] = peak_memory(write_snvs(work / f"m{size}.vcf", size), default_promoter_model(),
                                       work / f"m{size}.tsv", args.threads)
            print(f"{size} variants: peak RSS, traced peak (MB) {memory[size]}", flush=True)
    lines = [f"score-variants, {args.threads} torch threads, CPU", "",
             "| case | variants | seconds | variants/s | CPU seconds | variants per CPU second |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {name} | {r['variants']} | {r['seconds']} | {r['variants_per_s']} | {r['cpu_seconds']} | "
              f"{r['variants_per_cpu_s']} |" for name, r in speed.items()]
    lines += ["", "| promoter variants | peak RSS (MB) | peak Python allocations while scoring (MB) |", "|---:|---:|---:|"]
    lines += [f"| {size:,} | {rss} | {traced} |" for size, (rss, traced) in memory.items()]
    table = "\n".join(lines)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "variants.md").write_text(table + "\n")
        (args.out / "variants.json").write_text(json.dumps({"threads": args.threads, "speed": speed,
                                                            "peak_rss_mb": memory}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
