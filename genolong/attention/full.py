"""Dense softmax attention through ``torch.nn.functional.scaled_dot_product_attention``."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from genolong.attention import register_attention
from genolong.attention.alibi import token_positions
from genolong.attention.base import Attention, long_length
from genolong.core.errors import ConfigError


@register_attention("full")
class FullAttention(Attention):
    """Every token attends to every real token; any configuration, any length, no global tokens.
    Shapes: q, k, v (B, H, L, D); padding_mask (B, L) bool, True = real; output (B, H, L, D)."""

    #: queries may be any prefix of the keys' tokens (``Block.forward(queries=...)``)
    accepts_query_subset = True
    position_types = ("absolute", "rotary", "alibi")

    @classmethod
    def long_settings(cls, trained, max_length, block_size, global_tokens):
        """Full attention over ``max_length`` tokens (LSG §4.1's baseline): the positions only."""
        length = long_length("full", trained, max_length)
        if block_size is not None:
            raise ConfigError("--block-size does not apply to full attention")
        if global_tokens:
            raise ConfigError(f"--global-tokens {global_tokens}: full attention has no global tokens")
        return {"max_position_embeddings": length}

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        keys = token_positions(k.shape[2], self.num_prepended, k.device)
        bias = self.alibi_bias(keys[: q.shape[2]], keys, q.dtype)  # (H, Lq, L) or None
        return full_attention(q, k, v, padding_mask, self.dropout if self.training else 0.0, bias)


def full_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, padding_mask: torch.Tensor | None,
                   dropout_p: float, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax attention of every query over every real key: (B, H, Lq, D), (B, H, L, D) -> (B, H, Lq, D),
    with ``bias`` (H, Lq, L) added to the scaled scores when given (ALiBi). With fewer queries than keys
    ([CLS] alone) the math kernel runs: the flash kernel's sums would depend on the thread count."""
    mask = None if padding_mask is None else padding_mask[:, None, None, :]  # (B, 1, 1, L)
    if bias is not None:
        mask = bias[None] if mask is None else bias[None].masked_fill(~mask, float("-inf"))  # (B | 1, H, Lq, L)
    kernel = sdpa_kernel(SDPBackend.MATH) if q.shape[2] < k.shape[2] else contextlib.nullcontext()
    with kernel:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
