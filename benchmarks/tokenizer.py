"""Tokenizer benchmark: training time, peak RSS and held-out bp/token vs sample size.

Trains on the first 90% of C. elegans chrX (../shared/data/genomes/ce2chrX.fa.gz),
measures on the last 10%, then trains on a generated genome ~11x larger to show
that peak memory is bounded by the sample, not the genome. Each training run is a
separate ``genolong tokenizer train`` process so its peak RSS is its own.

    python benchmarks/tokenizer.py [--samples 2e6,4e6,8e6,16e6] [--big-genome-mbp 200] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CE_X = REPO.parent / "shared" / "data" / "genomes" / "ce2chrX.fa.gz"
CE_X_LENGTH = 17_718_849
SPLIT = int(CE_X_LENGTH * 0.9)


def run_measured(argv: list[str]) -> tuple[float, float]:
    """Run ``argv``; return (wall seconds, peak RSS in MB) of that process alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def train(genome: Path, out: Path, sample_bp: int, regions: list[str]) -> tuple[float, float]:
    argv = [sys.executable, "-m", "genolong.cli.main", "tokenizer", "train", "--genome", str(genome), "--out", str(out),
            "--vocab-size", "32000", "--sample-bp", str(sample_bp), "--force"]
    for region in regions:
        argv += ["--region", region]
    return run_measured(argv)


def held_out(tokenizer_dir: Path) -> dict:
    from genolong.dna.regions import Region, iter_regions
    from genolong.dna.tokenizer import load_tokenizer, tokenizer_stats

    tok = load_tokenizer(tokenizer_dir)
    return tokenizer_stats(tok, iter_regions(CE_X, [Region("chrX", SPLIT)]))


def make_big_genome(path: Path, target_mbp: int, seed: int = 0) -> int:
    """Copies of chrX with 1% point mutations each, as separate chromosomes, until target size."""
    from genolong.dna.sequence import read_fasta

    (record,) = list(read_fasta(CE_X))
    rng = random.Random(seed)
    total = 0
    with open(path, "w") as out:
        copy = 0
        while total < target_mbp * 1_000_000:
            seq = bytearray(record.sequence.encode())
            for pos in rng.sample(range(len(seq)), len(seq) // 100):
                seq[pos] = ord(rng.choice("ACGT"))
            out.write(f">copy{copy}\n")
            text = seq.decode()
            out.write("\n".join(text[i:i + 80] for i in range(0, len(text), 80)) + "\n")
            total += len(seq)
            copy += 1
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", default="2e6,4e6,8e6,16e6")
    parser.add_argument("--big-genome-mbp", type=int, default=200)
    parser.add_argument("--out", type=Path, default=REPO / "scratch" / "bench_tokenizer")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for sample in [int(float(s)) for s in args.samples.split(",")]:
        tok_dir = args.out / f"ce_{sample}"
        seconds, rss = train(CE_X, tok_dir, sample, [f"chrX:0-{SPLIT}"])
        stats = held_out(tok_dir)
        rows.append({"genome": "ce2chrX[:90%]", "genome_mbp": SPLIT / 1e6, "sample_mbp": sample / 1e6,
                     "train_s": round(seconds, 1), "peak_rss_mb": round(rss),
                     "heldout_bp_per_token": round(stats["bp_per_token"], 3),
                     "encode_mbp_s": round(stats["encode_mbp_per_s"], 2)})
        print(rows[-1], flush=True)
    if args.big_genome_mbp:
        big = args.out / "big.fa"
        size = make_big_genome(big, args.big_genome_mbp)
        seconds, rss = train(big, args.out / "big_tok", 16_000_000, [])
        stats = held_out(args.out / "big_tok")
        rows.append({"genome": f"generated {size / 1e6:.0f} Mbp", "genome_mbp": size / 1e6, "sample_mbp": 16.0,
                     "train_s": round(seconds, 1), "peak_rss_mb": round(rss),
                     "heldout_bp_per_token": round(stats["bp_per_token"], 3),
                     "encode_mbp_s": round(stats["encode_mbp_per_s"], 2)})
        print(rows[-1], flush=True)
        big.unlink()
    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    print("\n| genome | genome Mbp | sample Mbp | train s | peak RSS MB | held-out bp/token | encode Mbp/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['genome']} | {r['genome_mbp']:.1f} | {r['sample_mbp']:.0f} | {r['train_s']} | "
              f"{r['peak_rss_mb']} | {r['heldout_bp_per_token']} | {r['encode_mbp_s']} |")


if __name__ == "__main__":
    main()
