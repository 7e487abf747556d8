"""ALiBi: attention with linear biases (Press, Smith & Lewis 2022, "Train Short, Test Long", Sec. 3).

Instead of position embeddings, head h adds ``-m_h * |i - j|`` to the score of query i on key j
(the bidirectional form of MosaicBERT / DNABERT-2). The slopes ``m_h`` are a geometric sequence:
for H a power of two, ``m_h = 2 ** (-8 (h + 1) / H)``; otherwise the H' = 2 ** floor(log2 H) slopes
of H', then every other slope of 2 H' until there are H (the paper's reference code, kept by
MosaicBERT). Tokens the encoder prepends (learned global tokens) have no position: no bias to or
from them. The bias is added to the scaled scores, before the softmax; padded keys stay excluded.
"""

from __future__ import annotations

import math

import torch


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """(H,) float64 slopes ``m_h`` of ALiBi (module docstring)."""

    def power_of_two(count: int) -> list[float]:
        start = 2.0 ** (-8.0 / count)
        return [start ** (h + 1) for h in range(count)]

    closest = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(closest)
    if closest < num_heads:
        slopes += power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_distance(query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """``|p_i - p_j|``, elementwise with broadcasting, 0 where either position is negative (a positionless
    token), in the positions' dtype (float for LSG's pooled tokens): the one rule every path applies."""
    distance = (query_positions - key_positions).abs()
    return distance.masked_fill((query_positions < 0) | (key_positions < 0), 0)


def alibi_bias(slopes: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """``-m_h |p_i - p_j|`` for every head, query and key: (H,), (Q,), (K,) -> (H, Q, K), in the dtype of
    ``slopes``; 0 in the row and column of a negative (absent) position."""
    distance = alibi_distance(query_positions[:, None], key_positions[None, :]).to(slopes.dtype)  # (Q, K)
    return -slopes[:, None, None] * distance


def bias_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype ALiBi biases are computed in for scores of ``dtype``: float64 for float64, else float32
    (then cast to ``dtype``), so that a float64 reference is exact and half precision rounds once."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def token_positions(length: int, num_prepended: int, device: torch.device | None = None) -> torch.Tensor:
    """(length,) int64 positions of a sequence whose first ``num_prepended`` tokens are prepended
    global tokens: -1 for those, then 0, 1, ..."""
    return (torch.arange(length, device=device) - num_prepended).clamp(min=-1)
