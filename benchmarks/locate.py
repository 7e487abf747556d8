"""Locate-and-extend benchmark: can 4.4M DeepSEA inputs be located in GRCh37 in hours on 2 cores?

BigBird's chromatin task (App. F.3) needs the 8,000-bp GRCh37 window around each of the
4.4M DeepSEA training inputs (1,000 bp), found again by exact match on either strand
(genolong/prep/locate.py). GRCh37 is not available offline, so the measurement has two parts:

1. Real DNA: C. elegans chrX (17.7 Mbp, ``ce2chrX.fa.gz``): FASTA read rate, index build
   rate, locate rate for 1,000-bp windows sampled from it (half reverse-complemented, 2%
   with a point mutation), window-cutting rate; positions are checked.
2. Scale: a generated human-like genome of ``--synthetic-mbp`` (random sequence
   overwritten with mutated Alu-like and L1-like repeat copies, 10% and 17% of the bases,
   2-25% divergence, and 3% microsatellites), in a child process whose peak RSS is
   reported: build rate, index size and locate rate with a large, repetitive index.

It then extrapolates to GRCh37 (3.1 Gbp) x 4.4M queries. Timings are single-process,
one core. Printed as text, also written as JSON with ``--json``.

    python benchmarks/locate.py [--queries 100000] [--synthetic-mbp 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from genolong.datasets.chromatin import LocateStatus
from genolong.dna.sequence import read_fasta, reverse_complement_rows
from genolong.prep.locate import GenomeIndex

REPO = Path(__file__).resolve().parents[1]
CE_X = REPO.parent / "shared" / "data" / "genomes" / "ce2chrX.fa.gz"
GRCH37_BP, DEEPSEA_TRAIN_ROWS, INPUT, CONTEXT = 3.1e9, 4_400_000, 1000, 8000


def sample_queries(index: GenomeIndex, count: int, rng: np.random.Generator, mutated: float = 0.02):
    """``count`` 1,000-bp windows of the indexed genome without N; half reverse-complemented.

    Returns:
        ``(queries (count, 1000) uint8, global starts, minus-strand mask, mutated mask)``.
    """
    chrom = rng.choice(len(index.names), count, p=index.lengths / index.lengths.sum())
    starts = index.starts[chrom] + (rng.random(count) * (index.lengths[chrom] - INPUT)).astype(np.int64)
    queries = np.stack([index.sequence[start : start + INPUT] for start in starts])
    clean = (queries != ord("N")).all(axis=1)
    queries, starts, chrom = queries[clean], starts[clean], chrom[clean]
    minus = rng.random(len(queries)) < 0.5
    queries[minus] = reverse_complement_rows(queries[minus])
    changed = rng.random(len(queries)) < mutated
    position = rng.integers(0, INPUT, len(queries))
    rows = np.flatnonzero(changed)
    queries[rows, position[rows]] = np.where(queries[rows, position[rows]] == ord("A"), ord("C"), ord("A"))
    return queries, starts - index.starts[chrom], minus, changed


def time_locate(index: GenomeIndex, queries, starts, minus, changed) -> dict:
    started = time.perf_counter()
    found = index.locate(queries)
    seconds = time.perf_counter() - started
    located = found.status == LocateStatus.LOCATED
    assert (found.start[located & ~changed] == starts[located & ~changed]).all(), "wrong position"
    assert ((found.strand[located & ~changed] < 0) == minus[located & ~changed]).all(), "wrong strand"
    started = time.perf_counter()
    index.cut_windows(found, queries, CONTEXT)
    window_seconds = time.perf_counter() - started
    return {
        "queries": len(queries),
        "locate_seconds": round(seconds, 2),
        "queries_per_s": round(len(queries) / seconds),
        "windows_per_s": round(len(queries) / window_seconds),
        "status": found.counts(),
        "unmutated_located_fraction": round(float(located[~changed].mean()), 5),
    }


def bench_real(queries: int) -> dict:
    started = time.perf_counter()
    records = [(record.name, record.sequence) for record in read_fasta(CE_X)]
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    index = GenomeIndex.from_records(records)
    build_seconds = time.perf_counter() - started
    result = {
        "genome": CE_X.name,
        "mbp": index.total_bp / 1e6,
        "fasta_read_mbp_per_s": round(index.total_bp / 1e6 / read_seconds, 1),
        "index_build_mbp_per_s": round(index.total_bp / 1e6 / build_seconds, 1),
        "indexed_blocks": index.indexed_blocks,
    }
    result.update(time_locate(index, *sample_queries(index, queries, np.random.default_rng(0))))
    return result


# -- a human-like synthetic genome ---------------------------------------------------------------

REPEAT_FAMILIES = (  # (name, consensus length, fragment length range, share of the genome)
    ("Alu-like", 300, (280, 300), 0.10),
    ("L1-like", 6000, (500, 6000), 0.17),
)


def mutated_copy(consensus: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    divergence = rng.uniform(0.02, 0.25)
    copy = consensus.copy()
    mutate = rng.random(len(copy)) < divergence
    copy[mutate] = rng.integers(0, 4, int(mutate.sum()), dtype=np.uint8)
    return copy[::-1] ^ 3 if rng.random() < 0.5 else copy  # 2-bit codes: complement = xor 3


def synthetic_chromosome(length: int, consensus: dict, rng: np.random.Generator) -> str:
    """Random bases overwritten with mutated repeat copies and microsatellites, as ACGT text."""
    codes = rng.integers(0, 4, length, dtype=np.uint8)
    for name, _, (shortest, longest), share in REPEAT_FAMILIES:
        for _ in range(int(share * length / ((shortest + longest) / 2))):
            size = int(rng.integers(shortest, longest + 1))
            begin = int(rng.integers(0, len(consensus[name]) - size + 1))
            copy = mutated_copy(consensus[name][begin : begin + size], rng)
            at = int(rng.integers(0, length - size))
            codes[at : at + size] = copy
    for _ in range(int(0.03 * length / 110)):  # microsatellites: (unit)n, unit 1-6 bp, 20-200 bp long
        unit = rng.integers(0, 4, int(rng.integers(1, 7)), dtype=np.uint8)
        size = int(rng.integers(20, 201))
        at = int(rng.integers(0, length - size))
        codes[at : at + size] = np.resize(unit, size)
    return np.frombuffer(b"ACGT", np.uint8)[codes].tobytes().decode("ascii")


def bench_synthetic(mbp: int, queries: int) -> dict:
    rng = np.random.default_rng(1)
    consensus = {name: rng.integers(0, 4, size, dtype=np.uint8) for name, size, _, _ in REPEAT_FAMILIES}
    chromosome_mbp = 125
    lengths = [chromosome_mbp * 10**6] * (mbp // chromosome_mbp) + (
        [mbp % chromosome_mbp * 10**6] if mbp % chromosome_mbp else []
    )
    started = time.perf_counter()
    generated = 0.0

    def records():
        nonlocal generated
        for number, length in enumerate(lengths, start=1):
            began = time.perf_counter()
            sequence = synthetic_chromosome(length, consensus, rng)
            generated += time.perf_counter() - began
            yield f"synth{number}", sequence

    index = GenomeIndex.from_records(records())
    build_seconds = time.perf_counter() - started - generated
    result = {
        "genome": f"synthetic human-like, {mbp} Mbp",
        "mbp": index.total_bp / 1e6,
        "index_build_mbp_per_s": round(index.total_bp / 1e6 / build_seconds, 1),
        "indexed_blocks": index.indexed_blocks,
    }
    result.update(time_locate(index, *sample_queries(index, queries, np.random.default_rng(2))))
    result["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    return result


def extrapolate(real: dict, synthetic: dict | None) -> dict:
    """Hours for GRCh37 x 4.4M inputs (one core), from the measured rates."""
    scale = synthetic or real
    read_s = GRCH37_BP / 1e6 / real["fasta_read_mbp_per_s"]
    build_s = GRCH37_BP / 1e6 / scale["index_build_mbp_per_s"]
    locate_s = DEEPSEA_TRAIN_ROWS / scale["queries_per_s"]
    windows_s = DEEPSEA_TRAIN_ROWS / scale["windows_per_s"]
    result = {
        "based_on": scale["genome"],
        "read_fasta_h": round(read_s / 3600, 3),
        "build_index_h": round(build_s / 3600, 3),
        "locate_4.4M_h": round(locate_s / 3600, 3),
        "cut_4.4M_windows_h": round(windows_s / 3600, 3),
        "total_h": round((read_s + build_s + locate_s + windows_s) / 3600, 2),
    }
    if synthetic:
        result["peak_rss_gb_at_3.1_gbp"] = round(
            synthetic["peak_rss_gb"] * GRCH37_BP / (synthetic["mbp"] * 1e6), 1
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000, help="queries per genome (default 100000)")
    parser.add_argument(
        "--synthetic-mbp",
        type=int,
        default=1000,
        help="size of the generated human-like genome; 0 skips it (default 1000)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--synthetic-only", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.synthetic_only:
        print(json.dumps(bench_synthetic(args.synthetic_mbp, args.queries)))
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (timings are noisy under load)")
    real = bench_real(args.queries)
    print("real genome:", json.dumps(real, indent=1))
    synthetic = None
    if args.synthetic_mbp:
        child = subprocess.run(
            [
                sys.executable,
                __file__,
                "--synthetic-only",
                "--synthetic-mbp",
                str(args.synthetic_mbp),
                "--queries",
                str(args.queries),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        synthetic = json.loads(child.stdout)
        print("synthetic genome:", json.dumps(synthetic, indent=1))
    estimate = extrapolate(real, synthetic)
    print("GRCh37 x 4.4M inputs, one core:", json.dumps(estimate, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"real": real, "synthetic": synthetic, "grch37": estimate}, indent=1))


if __name__ == "__main__":
    main()
