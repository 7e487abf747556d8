"""Attention inputs and the reference comparison shared by the attention path and position tests."""

from __future__ import annotations

import torch

from genolong.attention import attention_class
from genolong.attention.lsg import SPARSITY_TYPES

HEADS, HEAD_DIM = 4, 8


LSG = dict(block_size=8, sparse_block_size=8, sparsity_factor=2, num_global_tokens=2)


VARIANTS = {
    "bigbird-itc": ("bigbird", dict(block_size=8, num_random_blocks=2)),
    "bigbird-etc": ("bigbird", dict(block_size=8, num_random_blocks=2, global_token_location="etc")),
    "longformer": ("longformer", dict(attention_window=16, num_global_tokens=2)),
    **{f"lsg-{kind}": ("lsg", dict(LSG, sparsity_type=kind)) for kind in SPARSITY_TYPES},
    "lsg-pooling-wide-sparse-blocks": ("lsg", dict(LSG, sparsity_type="pooling", sparse_block_size=16)),
}


#: Sequence lengths (in units of length_multiple) at which each pattern covers every pair.
COVERING_UNITS = {"bigbird": 4, "longformer": 1, "lsg": 2}


def length(config, units: int) -> int:
    """Prepended global tokens + ``units`` multiples of the length unit."""
    cls = attention_class(config.backbone)
    return cls.num_extra_global_tokens(config) + units * cls.length_multiple(config)


def qkv(
    batch: int, seq_len: int, dtype=torch.float64, seed: int = 0, requires_grad: bool = False, dim=HEAD_DIM
):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(batch, HEADS, seq_len, dim, generator=gen, dtype=dtype).requires_grad_(requires_grad)
        for _ in range(3)
    ]


def padding(batch: int, seq_len: int, pads=(0, 13, 21)) -> torch.Tensor:
    """(B, L) bool; sequence i ends with pads[i] padding tokens (not block-aligned)."""
    mask = torch.ones(batch, seq_len, dtype=torch.bool)
    for i in range(batch):
        if pads[i]:
            mask[i, -pads[i] :] = False
    return mask


def run(attn, impl: str, q, k, v, mask):
    attn.attention_impl = impl
    return attn(q, k, v, mask)


def output_and_grads(attn, impl, q, k, v, mask):
    out = run(attn, impl, q, k, v, mask)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=out.device).view_as(out)  # a non-trivial loss
    return out, torch.autograd.grad((out * weights).sum(), (q, k, v))


def max_error(a, b) -> float:
    return (a - b).abs().max().item()
