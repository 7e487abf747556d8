"""Rotary position embeddings (Su et al. 2021, "RoFormer", Sec. 3.4), as ESM, Nucleotide
Transformer v2 and ModernBERT apply them.

Queries and keys are rotated by their token's position p before the dot product: pair
``(x1[i], x2[i])`` of the head's halves turns by ``p * base ** (-2 i / D)`` ("rotate half",
GPT-NeoX's layout: ``x * cos + cat(-x2, x1) * sin``), every dimension. Prepended global tokens
are not rotated; the first sequence token has position 0.
"""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Rotary embedding of heads of ``head_dim`` (even) dimensions with angle base ``base``:
    ``forward(q, k, num_prepended)``, q (B, H, Q, D) the first Q <= L tokens, k (B, H, L, D) ->
    the rotated (q, k), same shapes and dtypes."""

    def __init__(self, head_dim: int, base: float):
        super().__init__()
        self.base = float(base)
        self.head_dim = head_dim

    @property
    def inv_freq(self) -> torch.Tensor:
        """(D / 2,) float32 angular frequencies ``base ** (-2 i / D)``. Computed, not a buffer: a
        model loaded with ``from_pretrained`` does not restore non-persistent buffers, and a model
        cast to bf16 would round a buffer."""
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim
        return 1.0 / (self.base ** exponents)

    def cos_sin(self, length: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(L, D) cosines and sines of positions 0 .. L - 1, in float64 for float64 inputs, else float32."""
        dtype = torch.float64 if dtype == torch.float64 else torch.float32
        angles = torch.outer(torch.arange(length, device=device, dtype=dtype), self.inv_freq.to(device, dtype))
        angles = torch.cat([angles, angles], dim=-1)  # (L, D)
        return angles.cos(), angles.sin()

    def forward(self, q: torch.Tensor, k: torch.Tensor, num_prepended: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.cos_sin(k.shape[2] - num_prepended, k.device, k.dtype)
        return rotate_from(q, cos, sin, num_prepended), rotate_from(k, cos, sin, num_prepended)


def rotate_from(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int) -> torch.Tensor:
    """x (B, H, L, D) with its tokens from ``start`` on rotated to positions 0, 1, ... (cos, sin: (>= L - start, D))."""
    count = max(x.shape[2] - start, 0)
    rotated = rotate(x[:, :, start:], cos[:count], sin[:count])
    return torch.cat([x[:, :, :start], rotated], dim=2) if start else rotated


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` in cos's dtype, back in x's: (..., L, D), (L, D) -> (..., L, D)."""
    wide = x.to(cos.dtype)
    first, second = wide.chunk(2, dim=-1)
    return (wide * cos + torch.cat([-second, first], dim=-1) * sin).to(x.dtype)
