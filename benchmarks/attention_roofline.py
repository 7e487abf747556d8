"""How small can BigBird's attention share get here? The "at most +25% over the floor" target against arithmetic.

``genolong bench attention`` reports the *attention share*: our ``bigbird`` forward time
divided by the ``floor`` (the same encoder with the attention skipped), minus 1. This script
asks what share the arithmetic alone allows on this machine, at the benchmark's small size
(hidden 256, 4 layers, 4 heads of 64, FFN 1,024, batch 1) and BigBird's paper pattern:

* **FLOPs**, counted from the real pattern (:meth:`BigBirdAttention.build_pattern`, so the
  shorter windows of the edge blocks are counted as they are): per layer, a non-global query
  block of ``b`` queries attends to the ``G`` global keys and to its window and random
  blocks; each of the ``G`` global queries attends to all ``L`` keys. A query-key pair costs
  ``4 D`` FLOPs (``q . k`` and ``p v``, a multiply and an add each). The linear layers cost
  ``2 L (4 h^2 + 2 h f)`` per layer.
* **Rates**, measured: the floor's forward time; the matrix product that dominates it
  (``(L, h) @ (h, f)``, the FFN's first layer, into a preallocated output: the best-shaped
  product of the model, at about the machine's large-GEMM rate); and the attention's own block
  kernel on pre-gathered keys (``_attend``: fused SDPA in fp32, ``baddbmm`` / softmax /
  ``bmm`` in bf16), one chunk of the gathered-blocks path at a time.
* **Bounds**: the share the attention would add if its FLOPs ran at the FFN's GEMM rate
  (no gathers, no softmax cost: the best case), at the block kernel's rate (still no
  gathers), and the FLOP rate the attention would need for the +25% target.

    python benchmarks/attention_roofline.py                   # fp32, 4K and 16K tokens
    python benchmarks/attention_roofline.py --dtype bf16 --lengths 4096 16384

Timings are the best of ``--repeats`` calls after an untimed one; run it on a quiet machine (the load average is
printed).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import torch

from genolong.attention.bigbird import BigBirdAttention
from genolong.attention.paths import _attend, _chunk_blocks
from genolong.experiments.bench.attention import BenchSize, floor_model
from genolong.experiments.bench.attention import measure as measure_call
from genolong.model.modeling import GenolongConfig

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TARGET_SHARE = 0.25


def best_time(call: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``repeats`` calls after one untimed call, seconds (the benchmark's own
    :func:`genolong.experiments.bench.attention.measure`, with no time budget)."""
    return measure_call(call, repeats, budget_s=float("inf"))["time_s"]


def attention_flops(attention: BigBirdAttention, length: int, head_dim: int) -> tuple[float, int]:
    """(FLOPs of one attention layer over ``length`` tokens, keys per full non-global block)."""
    pattern = attention.build_pattern(length, torch.device("cpu"))
    g, b, u = pattern.num_global, pattern.query_block, pattern.unit
    slots = (pattern.key_units >= 0).sum(-1).expand(attention.num_heads, -1)  # (H, nb)
    pairs = b * (g * slots.numel() + u * int(slots.sum())) + g * length * attention.num_heads
    return 4.0 * head_dim * pairs, g + u * int(slots.max())


def linear_flops(size: BenchSize, length: int) -> float:
    """FLOPs of one layer's Q, K, V, output and FFN projections over ``length`` tokens."""
    h, f = size.hidden_size, size.intermediate_size
    return 2.0 * length * (4 * h * h + 2 * h * f)


def measure(length: int, dtype: torch.dtype, size: BenchSize, repeats: int) -> dict[str, float]:
    """FLOPs, the floor's time and the two rates (FLOP/s) at ``length`` tokens."""
    heads = size.num_attention_heads
    head_dim = size.hidden_size // heads
    config = GenolongConfig(backbone="bigbird", max_position_embeddings=length, num_attention_heads=heads)
    attention = BigBirdAttention(config)
    attention_per_layer, keys = attention_flops(attention, length, head_dim)

    floor, _ = floor_model(size, length, mlm=False)
    ids = torch.randint(5, size.vocab_size, (1, length))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        floor_s = best_time(lambda: floor.eval()(input_ids=ids), repeats)

    tokens = torch.randn(length, size.hidden_size, dtype=dtype)
    ffn_in = torch.randn(size.hidden_size, size.intermediate_size, dtype=dtype)
    product = torch.empty(length, size.intermediate_size, dtype=dtype)
    gemm_s = best_time(lambda: torch.matmul(tokens, ffn_in, out=product), repeats)

    blocks = _chunk_blocks(1, heads, keys, head_dim, tokens.element_size())  # one chunk of the path
    q = torch.randn(heads, blocks, attention.block_size, head_dim, dtype=dtype)
    k, v = (torch.randn(heads, blocks, keys, head_dim, dtype=dtype) for _ in range(2))
    visible = torch.ones(1, blocks, 1, keys, dtype=torch.bool)
    with torch.no_grad():
        kernel_s = best_time(lambda: _attend(q, k, v, visible, 0.0), repeats)
    return {
        "attention": attention_per_layer * size.num_hidden_layers,
        "linear": linear_flops(size, length) * size.num_hidden_layers,
        "floor_s": floor_s,
        "gemm_rate": 2.0 * length * size.hidden_size * size.intermediate_size / gemm_s,
        "kernel_rate": 4.0 * head_dim * heads * blocks * attention.block_size * keys / kernel_s,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    size = BenchSize()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.threads} threads; {args.dtype}; {size}")
    print(
        "| tokens | attention GFLOP | linear GFLOP | ratio | floor s | FFN GEMM GFLOP/s | block kernel "
        "GFLOP/s | share at GEMM rate | share at kernel rate | GFLOP/s needed for +25% |"
    )
    print("|---:" * 10 + "|")
    for length in args.lengths:
        m = measure(length, DTYPES[args.dtype], size, args.repeats)
        attention, floor_s = m["attention"], m["floor_s"]
        print(
            f"| {length:,} | {attention / 1e9:.2f} | {m['linear'] / 1e9:.2f} | {attention / m['linear']:.2f} "
            f"| {floor_s:.3f} | {m['gemm_rate'] / 1e9:.0f} | {m['kernel_rate'] / 1e9:.0f} "
            f"| +{attention / m['gemm_rate'] / floor_s:.0%} | +{attention / m['kernel_rate'] / floor_s:.0%} "
            f"| {attention / (TARGET_SHARE * floor_s) / 1e9:.0f} |"
        )


if __name__ == "__main__":
    main()
