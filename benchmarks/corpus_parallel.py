"""Parallel corpus build: Mbp/s per number of workers on a synthetic genome of >= 300 Mbp, and the
GRCh37 x 10-pass time extrapolated to 16 cores.

The genome: mutated copies of the real C. elegans chrX (1% point mutations each, as
``benchmarks/tokenizer.py`` makes them), one chromosome per copy, copy0 held out for validation and
copy1 for test. A 32K BPE tokenizer is trained on a 4-Mbp sample of the source. Each worker count is
one ``genolong corpus build --workers N`` process into a fresh directory; the shards of every run
must be byte-identical to the first one's (checked, printed).

The extrapolation schedules the 25 GRCh37 chromosomes (hg19 chr1-22, X, Y, M: 3,095,693,983 bp)
x ``10`` passes on 16 workers in genome order, a worker taking the next chromosome when it is free,
each at the per-worker rate measured with the most workers: a chromosome is the unit, so chr1
(249 Mbp) bounds the time from below. On a machine shared with other jobs the wall times measure the
sharing: the CPU time of the build and its workers gives ``Mbp per CPU-s``, what one free core
delivers, and a second extrapolation at that rate per worker.

    python benchmarks/corpus_parallel.py [--source ../shared/data/genomes/ce2chrX.fa.gz]
        [--genome-mbp 300] [--passes 1] [--workers 1,2,4,8,16] [--out scratch/bench_corpus_parallel]

Needs only the source FASTA; prints a markdown table and writes it with a JSON copy to ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # genolong from this checkout, installed or not
#: hg19 (GRCh37) chromosome lengths in genome order (UCSC chromInfo).
GRCH37 = [249_250_621, 243_199_373, 198_022_430, 191_154_276, 180_915_260, 171_115_067, 159_138_663, 146_364_022,
          141_213_431, 135_534_747, 135_006_516, 133_851_895, 115_169_878, 107_349_540, 102_531_392, 90_354_753,
          81_195_210, 78_077_248, 59_128_983, 63_025_520, 48_129_895, 51_304_566, 155_270_560, 59_373_566, 16_571]
GRCH37_PASSES = 10


def make_genome(source: Path, path: Path, target_mbp: float, seed: int = 0) -> int:
    """Copies of the source's first record with 1% point mutations each until ``target_mbp``; returns the bp."""
    from genolong.dna.sequence import read_fasta

    record = next(iter(read_fasta(source)))
    base = np.frombuffer(record.sequence.encode(), dtype=np.uint8)
    rng = np.random.default_rng(seed)
    total = copy = 0
    with open(path, "w") as out:
        while total < target_mbp * 1e6:
            seq = base.copy()
            where = rng.choice(len(seq), len(seq) // 100, replace=False)
            seq[where] = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, len(where))]
            text = seq.tobytes().decode()
            out.write(f">copy{copy}\n" + "\n".join(text[i:i + 80] for i in range(0, len(text), 80)) + "\n")
            total += len(seq)
            copy += 1
    return total


def genolong(*argv: str) -> tuple[float, float, float]:
    """Run ``genolong ARGV``; (wall s, CPU s of it and its workers, peak RSS MB of its largest process)."""
    start = time.perf_counter()
    # Run from a neutral directory: the installed package (with its data builders), not the checkout's sources.
    proc = subprocess.Popen([sys.executable, "-m", "genolong.cli.main", *argv], stdout=subprocess.DEVNULL,
                            cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"failed: genolong {' '.join(argv)}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def shard_digest(corpus: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and p.name != "corpus.json"):
        digest.update(path.relative_to(corpus).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def grch37_seconds(per_worker_mbp_s: float, workers: int) -> float:
    """Makespan of GRCh37 x 10 passes on ``workers``, chromosomes taken in genome order."""
    free = [0.0] * workers
    for bp in GRCH37:
        heapq.heappush(free, heapq.heappop(free) + bp * GRCH37_PASSES / (per_worker_mbp_s * 1e6))
    return max(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = Path(os.environ.get("GENOLONG_SHARED_DATA", REPO.parent / "shared" / "data"))
    parser.add_argument("--source", type=Path, default=shared / "genomes" / "ce2chrX.fa.gz",
                        help="FASTA whose first record is copied (default: ce2chrX.fa.gz of ../shared/data or '$GENOLONG_SHARED_DATA')")
    parser.add_argument("--genome-mbp", type=float, default=300)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default: 1,2)")
    parser.add_argument("--out", type=Path, default=REPO / "scratch" / "bench_corpus_parallel")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    genome, tokenizer = args.out / "genome.fa", args.out / "tokenizer"
    started = time.perf_counter()
    genome_bp = make_genome(args.source.resolve(), genome, args.genome_mbp)
    if not (tokenizer / "tokenizer.json").exists():
        genolong("tokenizer", "train", "--genome", str(args.source.resolve()), "--out", str(tokenizer),
                 "--vocab-size", "32000", "--sample-bp", "4000000", "--force")
    print(f"{genome_bp / 1e6:.1f} Mbp genome and tokenizer in {time.perf_counter() - started:.0f} s; "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)
    rows, reference = [], None
    for workers in [int(w) for w in args.workers.split(",")]:
        corpus = args.out / f"corpus_w{workers}"
        shutil.rmtree(corpus, ignore_errors=True)
        load = os.getloadavg()[0]
        seconds, cpu_s, rss = genolong("corpus", "build", "--genome", str(genome), "--tokenizer", str(tokenizer),
                                       "--out", str(corpus), "--passes", str(args.passes), "--workers", str(workers),
                                       "--valid-chromosomes", "copy0", "--test-chromosomes", "copy1")
        digest = shard_digest(corpus)
        reference = reference or digest
        rate = genome_bp * args.passes / seconds / 1e6
        rows.append({"workers": workers, "seconds": round(seconds, 1), "cpu_s": round(cpu_s, 1),
                     "mbp_per_s": round(rate, 2), "mbp_per_s_per_worker": round(rate / workers, 2),
                     "mbp_per_cpu_s": round(genome_bp * args.passes / cpu_s / 1e6, 2),
                     "peak_rss_mb": round(rss), "load_average": round(load, 2), "identical": digest == reference})
        print(rows[-1], flush=True)
        shutil.rmtree(corpus)
    genome.unlink()
    widest = max(rows, key=lambda r: r["workers"])
    seconds16 = grch37_seconds(widest["mbp_per_s_per_worker"], 16)
    free16 = grch37_seconds(widest["mbp_per_cpu_s"], 16)
    summary = {"genome_mbp": round(genome_bp / 1e6, 1), "passes": args.passes, "rows": rows,
               "grch37_x10_on_16_workers_minutes": round(seconds16 / 60, 1),
               "grch37_x10_on_16_workers_mbp_per_s": round(sum(GRCH37) * GRCH37_PASSES / seconds16 / 1e6, 1),
               "grch37_x10_on_16_free_cores_minutes": round(free16 / 60, 1),
               "from_per_worker_rate_at": widest["workers"]}
    (args.out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n{summary['genome_mbp']} Mbp x {args.passes} pass(es)\n")
    print("| workers | wall s | CPU s | Mbp/s | Mbp/s per worker | Mbp per CPU-s | peak RSS MB | load avg | same shards |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['seconds']} | {r['cpu_s']} | {r['mbp_per_s']} | {r['mbp_per_s_per_worker']} | "
              f"{r['mbp_per_cpu_s']} | {r['peak_rss_mb']} | {r['load_average']} | {'yes' if r['identical'] else 'NO'} |")
    print(f"\nGRCh37 x {GRCH37_PASSES} passes on 16 workers at {widest['mbp_per_s_per_worker']} Mbp/s per worker "
          f"(measured with {widest['workers']}): {summary['grch37_x10_on_16_workers_minutes']} min "
          f"({summary['grch37_x10_on_16_workers_mbp_per_s']} Mbp/s; chr1 alone "
          f"{GRCH37[0] * GRCH37_PASSES / widest['mbp_per_s_per_worker'] / 60e6:.1f} min)")
    print(f"at {widest['mbp_per_cpu_s']} Mbp per CPU-s per worker (16 free cores): "
          f"{summary['grch37_x10_on_16_free_cores_minutes']} min")


if __name__ == "__main__":
    main()
