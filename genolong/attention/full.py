"""Dense softmax attention through ``torch.nn.functional.scaled_dot_product_attention``."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from genolong.attention import register_attention
from genolong.attention.base import Attention


@register_attention("full")
class FullAttention(Attention):
    """Every token attends to every real token; any configuration, any length, no global tokens.

    Shapes: q, k, v (B, H, L, D); padding_mask (B, L) bool, True = real; output (B, H, L, D).
    """

    #: queries may be any prefix of the keys' tokens (``Block.forward(queries=...)``)
    accepts_query_subset = True

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return full_attention(q, k, v, padding_mask, self.dropout if self.training else 0.0)


def full_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, padding_mask: torch.Tensor | None, dropout_p: float
) -> torch.Tensor:
    """Softmax attention of every query over every real key: (B, H, Lq, D), (B, H, L, D) -> (B, H, Lq, D).

    With fewer queries than keys (a query subset, e.g. [CLS] alone) the flash kernel would split
    the keys across threads, making the sums depend on the thread count; the math kernel does not.
    """
    mask = None if padding_mask is None else padding_mask[:, None, None, :]  # (B, 1, 1, L)
    kernel = sdpa_kernel(SDPBackend.MATH) if q.shape[2] < k.shape[2] else contextlib.nullcontext()
    with kernel:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
