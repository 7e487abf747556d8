"""Data-acquisition benchmark: genome preparation and verified downloads, in numbers.

1. ``genolong genome prepare`` on C. elegans chrX (17.7 Mbp, plain gzip) and on a generated
   genome with one large chromosome: wall time, Mbp/s, output size and peak RSS of the
   process (memory should follow the largest chromosome, not the genome).
2. zlib levels on DNA: why BGZF blocks are written at level 4.
3. Downloads from a local HTTP server (127.0.0.1): MB/s with SHA-256, with SHA-256 + MD5
   (UCSC), with SHA-256 + BSD sum (Ensembl).

    python benchmarks/data_prep.py [--big-mbp 120] [--download-mb 256] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CE_X = REPO.parent / "shared" / "data" / "genomes" / "ce2chrX.fa.gz"


def run_measured(argv: list[str]) -> tuple[float, float]:
    """Run ``argv``; return (wall seconds, peak RSS in MB) of that process alone."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def bench_prepare(fasta: Path, bases: int, work: Path) -> dict:
    out = work / (fasta.name + ".bgz")
    seconds, rss = run_measured(
        [sys.executable, "-m", "genolong.cli.main", "genome", "prepare", str(fasta), "--out", str(out)]
    )
    return {
        "input": fasta.name,
        "mbp": bases / 1e6,
        "seconds": round(seconds, 2),
        "mbp_per_s": round(bases / 1e6 / seconds, 1),
        "input_mb": round(fasta.stat().st_size / 1e6, 1),
        "output_mb": round(out.stat().st_size / 1e6, 1),
        "peak_rss_mb": round(rss),
    }


def generated_genome(path: Path, mbp: int, seed: int = 0) -> int:
    """A gzip FASTA with chromosomes of mbp/2, mbp/3 and mbp/6 Mbp (soft-masked halves)."""
    rng = random.Random(seed)
    table = bytes.maketrans(bytes(range(256)), b"ACGTacgt" * 32)
    total = 0
    with gzip.open(path, "wb", compresslevel=1) as out:
        for index, share in enumerate((2, 3, 6), start=1):
            length = mbp * 1_000_000 // share
            out.write(f">chr{index}\n".encode())
            for start in range(0, length, 1 << 20):
                chunk = rng.randbytes(min(1 << 20, length - start)).translate(table)
                out.write(b"\n".join(chunk[i : i + 50] for i in range(0, len(chunk), 50)) + b"\n")
            total += length
    return total


def bench_zlib_levels() -> list[dict]:
    with gzip.open(CE_X) as handle:
        data = handle.read(65536 * 64)
    rows = []
    for level in (1, 4, 6, 9):
        start, size = time.perf_counter(), 0
        for offset in range(0, len(data), 65536):
            compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
            size += len(compressor.compress(data[offset : offset + 65536]) + compressor.flush())
        seconds = time.perf_counter() - start
        rows.append(
            {
                "level": level,
                "mb_per_s": round(len(data) / seconds / 1e6, 1),
                "ratio": round(size / len(data), 3),
            }
        )
    return rows


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def bench_downloads(size_mb: int, work: Path) -> list[dict]:
    from genolong.prep.integrity import Checksum, file_digests
    from genolong.prep.transfer import download

    served = work / "served"
    served.mkdir()
    payload = served / "blob.bin"
    with open(payload, "wb") as out:
        rng = random.Random(1)
        for _ in range(size_mb):
            out.write(rng.randbytes(1 << 20))
    digests = file_digests(payload, ["sha256", "md5", "bsd-sum"])
    handler = partial(_QuietHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/blob.bin"
    rows = []
    try:
        for label, algorithms in (("sha256", []), ("sha256+md5", ["md5"]), ("sha256+bsd-sum", ["bsd-sum"])):
            expected = [Checksum(name, digests[name], "benchmark") for name in ["sha256", *algorithms]]
            dest = work / f"{label}.bin"
            start = time.perf_counter()
            download(url, dest, expected=expected, progress=False)
            seconds = time.perf_counter() - start
            rows.append(
                {
                    "checks": label,
                    "mb": size_mb,
                    "seconds": round(seconds, 2),
                    "mb_per_s": round(size_mb / seconds, 1),
                }
            )
            dest.unlink()
    finally:
        server.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big-mbp", type=int, default=120, help="size of the generated genome (Mbp)")
    parser.add_argument("--download-mb", type=int, default=256, help="size of the downloaded file (MiB)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory(dir=REPO / "scratch" if (REPO / "scratch").is_dir() else None) as tmp:
        work = Path(tmp)
        results["prepare"] = [bench_prepare(CE_X, 17_718_849, work)]
        big = work / "generated.fa.gz"
        results["prepare"].append(bench_prepare(big, generated_genome(big, args.big_mbp), work))
        results["zlib_levels"] = bench_zlib_levels()
        results["downloads"] = bench_downloads(args.download_mb, work)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
