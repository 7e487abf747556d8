"""Attention kernels alone: forward and forward+backward time and peak memory, per backbone and path.

One attention layer with batch 1, 4 heads of 64 dims (the benchmark's small config), each backbone
at its default pattern:

* BigBird: blocks of 64, 3 window + 3 random + 2 global blocks, ITC.
* Longformer: a window of 512 tokens and 1 global token.
* LSG: blocks of 128, max-norm sparsity with factor 2, 1 global token.
* ``full``: SDPA, for reference.

Sequence lengths count the tokens; prepended global tokens come on top. Each (backbone,
path, dtype, length) runs in its own child process, so that the peak resident memory
(``ru_maxrss`` minus the resident size just before the first call) belongs to that
measurement alone. Times are the best of ``--repeats`` calls after one warm-up call. The
flex path is forward-only on CPU; its one-off compile time is reported separately.
Model-level numbers (hidden 256, 4 layers, against transformers' BigBird, Longformer and
BERT) come from ``genolong bench attention``, not from here.

    python benchmarks/attention_kernels.py                       # 1K..16K, gather path, fp32 + bf16
    python benchmarks/attention_kernels.py --lengths 1024,...,65536 --backbones bigbird \
        --paths gather,flex --dtypes float32 --csv kernels.csv

The load average is printed before and after: on a shared machine wall times are only as
quiet as the machine was. The CPU-time columns (all threads of the process) are steadier;
with ``--threads 1`` they approximate the wall time on an idle core.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time

HEADS, HEAD_DIM = 4, 64
DEFAULT_LENGTHS = (1024, 2048, 4096, 8192, 16384)
FIELDS = (
    "backbone",
    "path",
    "dtype",
    "length",
    "forward_s",
    "forward_backward_s",
    "forward_cpu_s",
    "forward_backward_cpu_s",
    "forward_peak_mb",
    "train_peak_mb",
    "compile_s",
)


def resident_mb() -> float:
    """Current resident set size of this process, MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    """Peak resident set size of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(backbone: str, path: str, dtype_name: str, length: int, repeats: int, threads: int) -> dict:
    """One measurement, run inside a child process."""
    import torch

    from genolong.attention import attention_class, attention_config, build_attention

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    cls = attention_class(backbone)
    params = {} if backbone == "full" else {"attention_impl": path}
    config = attention_config(
        backbone,
        num_attention_heads=HEADS,
        hidden_size=HEADS * HEAD_DIM,
        max_position_embeddings=length,
        **params,
    )
    attention = build_attention(config, 0)
    seq_len = cls.num_extra_global_tokens(config) + length
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, seq_len, HEAD_DIM, generator=gen).to(dtype) for _ in range(3))
    mask = torch.ones(1, seq_len, dtype=torch.bool)
    row = dict(backbone=backbone, path=path, dtype=dtype_name, length=length)

    def best(call) -> tuple[float, float]:
        """Best wall time and best CPU time (all threads) of ``repeats`` calls."""
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        return min(wall), min(cpu)

    baseline = resident_mb()
    with torch.no_grad():
        start = time.perf_counter()
        attention(q, k, v, mask)  # warm-up; for flex, the compile
        row["compile_s"] = round(time.perf_counter() - start, 2) if path == "flex" else ""
        row["forward_peak_mb"] = round(peak_mb() - baseline, 1)
        row["forward_s"], row["forward_cpu_s"] = best(lambda: attention(q, k, v, mask))
    if path == "flex":  # no backward pass on CPU
        row.update(forward_backward_s="", forward_backward_cpu_s="", train_peak_mb="")
        return row
    q, k, v = (x.requires_grad_() for x in (q, k, v))

    def train_step():
        attention(q, k, v, mask).sum().backward()

    train_step()
    row["train_peak_mb"] = round(peak_mb() - baseline, 1)
    row["forward_backward_s"], row["forward_backward_cpu_s"] = best(train_step)
    return row


def run_child(args: argparse.Namespace, backbone: str, path: str, dtype: str, length: int) -> dict | None:
    job = json.dumps(
        dict(
            backbone=backbone,
            path=path,
            dtype_name=dtype,
            length=length,
            repeats=args.repeats,
            threads=args.threads,
        )
    )
    done = subprocess.run([sys.executable, __file__, "--child", job], capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"  {backbone} {path} {dtype} {length}: failed: {last}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbones", default="bigbird,longformer,lsg,full")
    parser.add_argument("--paths", default="gather", help="gather and/or flex (full always runs SDPA)")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(**json.loads(args.child))))
        return

    print(
        f"load average before: {os.getloadavg()[0]:.2f}; {args.threads} threads; "
        f"batch 1, {HEADS} heads x {HEAD_DIM} dims"
    )
    header = (
        f"{'backbone':<11}{'path':<7}{'dtype':<9}{'length':>7}{'fwd s':>9}{'fwd+bwd s':>11}"
        f"{'fwd cpu s':>11}{'f+b cpu s':>11}{'fwd MiB':>9}{'train MiB':>11}{'compile s':>11}"
    )
    print(header)
    rows = []
    for backbone in args.backbones.split(","):
        for path in ["sdpa"] if backbone == "full" else args.paths.split(","):
            for dtype in args.dtypes.split(","):
                for length in map(int, args.lengths.split(",")):
                    row = run_child(args, backbone, path, dtype, length)
                    if row is None:
                        continue
                    rows.append(row)
                    print(
                        f"{backbone:<11}{path:<7}{dtype:<9}{length:>7}{row['forward_s']:>9.4f}"
                        f"{row['forward_backward_s'] or float('nan'):>11.4f}{row['forward_cpu_s']:>11.4f}"
                        f"{row['forward_backward_cpu_s'] or float('nan'):>11.4f}{row['forward_peak_mb']:>9.0f}"
                        f"{row['train_peak_mb'] or float('nan'):>11.0f}{row['compile_s'] or '':>11}",
                        flush=True,
                    )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
