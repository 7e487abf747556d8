"""Corpus build benchmark: throughput (Mbp/s over all passes) and peak RSS on a real genome,
extrapolated to GRCh37 x 10 passes.

    python benchmarks/corpus.py [--genome ../shared/data/genomes/ce2chrX.fa.gz] [--passes 10]

Trains (or reuses) a 32K tokenizer on the genome, then builds the corpus in a separate
``genolong corpus build`` process so the peak RSS is the build's own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRCH37_BP = 3_101_788_170  # primary assembly incl. N (UCSC hg19 chr1-22, X, Y, M)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--genome", type=Path, default=REPO.parent / "shared" / "data" / "genomes" / "ce2chrX.fa.gz")
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "scratch" / "bench_corpus")
    args = parser.parse_args()
    tokenizer = args.out / "tokenizer"
    if not (tokenizer / "tokenizer.json").exists():
        subprocess.run([sys.executable, "-m", "genolong.cli.main", "tokenizer", "train", "--genome", str(args.genome),
                        "--out", str(tokenizer), "--force"], check=True, stdout=subprocess.DEVNULL)
    corpus = args.out / f"corpus_p{args.passes}"
    subprocess.run(["rm", "-rf", str(corpus)], check=True)
    argv = [sys.executable, "-m", "genolong.cli.main", "corpus", "build", "--genome", str(args.genome),
            "--tokenizer", str(tokenizer), "--out", str(corpus), "--passes", str(args.passes)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit("corpus build failed")
    manifest = json.loads((corpus / "corpus.json").read_text())
    genome_bp = sum(s["bp"] for s in manifest["shards"])
    tokens = sum(t["tokens"] for t in manifest["totals"].values())
    shard_mb = max((corpus / s["split"] / f"{s['stem']}.tokens.u16").stat().st_size
                   for s in manifest["shards"] if s["tokens"]) / 2**20
    rate = genome_bp * args.passes / seconds / 1e6
    result = {
        "genome": str(args.genome), "genome_mbp": genome_bp / 1e6, "passes": args.passes,
        "seconds": round(seconds, 1), "mbp_per_s": round(rate, 2), "tokens": tokens,
        "peak_rss_mb": round(usage.ru_maxrss / 1024), "largest_shard_mb": round(shard_mb, 1),
        "grch37_x10_hours": round(GRCH37_BP * 10 / (rate * 1e6) / 3600, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
