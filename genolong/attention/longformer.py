"""Longformer attention (Beltagy et al. 2020, "Longformer: The Long-Document Transformer", Sec. 3.1).

* **Sliding window**: every token attends to itself and the ``w = attention_window // 2`` tokens on each
  side (``attention_window`` is the total window, as in transformers' ``LongformerConfig``; 512 in the
  paper's base models).
* **Global attention**: ``num_global_tokens`` tokens attend to every token, and every token to them.

Deviations forced by the attention contract (projected ``q, k, v``, never hidden states): global tokens
are learned tokens the encoder prepends (as in ETC and LSG; the first plays ``[CLS]``'s role), and global
and local attention share one set of projections (no ``Q_g, K_g, V_g``). Dilation (the paper's
character LM only) is not implemented. Execution (the chunked scheme of Sec. 3.2, with smaller chunks):
non-global query blocks of ``bq`` tokens, the largest divisor of ``w`` up to 64, each attend to the
``2 w / bq + 1`` key blocks around them, trimmed to the exact band ``|i - j| <= w``.
"""

from __future__ import annotations

from typing import Any

import torch

from genolong.attention import register_attention
from genolong.attention.base import long_length, require_int
from genolong.attention.blocksparse import SHARED_DEFAULTS, BlockSparseAttention
from genolong.attention.pattern import BlockPattern
from genolong.core.errors import ConfigError

#: Upper bound on the query block of the gathered-blocks path (tokens).
MAX_QUERY_BLOCK = 64


def query_block(one_sided_window: int) -> int:
    """The largest divisor of the one-sided window that is at most MAX_QUERY_BLOCK."""
    return max(d for d in range(1, min(MAX_QUERY_BLOCK, one_sided_window) + 1) if one_sided_window % d == 0)


@register_attention("longformer")
class LongformerAttention(BlockSparseAttention):
    """Longformer: a symmetric sliding window of ``attention_window`` tokens + global tokens. q, k, v
    ``(B, H, L, D)``; padding_mask ``(B, L)``; output ``(B, H, L, D)``; the first ``num_global_tokens``
    tokens global, ``L - num_global_tokens`` a multiple of :meth:`length_multiple`."""

    config_defaults: dict[str, Any] = {**SHARED_DEFAULTS, "attention_window": 512, "num_global_tokens": 1}

    @classmethod
    def long_settings(cls, trained, max_length, block_size, global_tokens):
        """A one-sided window (``block_size``) of at most the trained positions (default: all of them),
        ``global_tokens`` global tokens."""
        window = trained if block_size is None else block_size
        if not 1 <= window <= trained:
            raise ConfigError(f"longformer: the one-sided window (--block-size) {window} must be between 1 and "
                              f"the {trained} trained positions")
        return {"max_position_embeddings": long_length("longformer", trained, max_length, query_block(window),
                                                       "query block"),
                "attention_window": 2 * window, "num_global_tokens": global_tokens}

    @classmethod
    def long_reading(cls, config: Any) -> str:
        return f"window {config.attention_window // 2} each side"

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.window = int(config.attention_window) // 2
        self.block = query_block(self.window)
        self.num_global_tokens = int(config.num_global_tokens)

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """Raise ConfigError for an impossible Longformer setting."""
        super().validate_config(config)
        window = config.attention_window
        if isinstance(window, (list, tuple)):
            raise ConfigError("longformer: attention_window must be one integer "
                              "(per-layer windows are not supported)")
        window = require_int(config, "attention_window", 2, "longformer")
        require_int(config, "num_global_tokens", 0, "longformer")
        if window % 2:
            raise ConfigError(f"longformer: attention_window must be even (w tokens on each side), "
                              f"got {window}")
        if window > config.max_position_embeddings:
            raise ConfigError(f"longformer: attention_window {window} is larger than the sequence "
                              f"(max_position_embeddings {config.max_position_embeddings})")

    @classmethod
    def num_extra_global_tokens(cls, config: Any) -> int:
        """The ``num_global_tokens`` learned tokens the encoder prepends."""
        return int(config.num_global_tokens)

    @classmethod
    def length_multiple(cls, config: Any) -> int:
        """The query block ``bq``: the largest divisor of ``attention_window // 2`` up to 64."""
        return query_block(int(config.attention_window) // 2)

    def build_pattern(self, seq_len: int, device: torch.device) -> BlockPattern:
        """The key blocks covering each query block's band, and the band itself."""
        num_global = min(self.num_global_tokens, seq_len)
        num_blocks = (seq_len - num_global) // self.block
        reach = self.window // self.block
        window = torch.arange(num_blocks)[:, None] + torch.arange(-reach, reach + 1)  # (nb, 2 reach + 1)
        units = window.where((window >= 0) & (window < num_blocks), -1)[None]
        return BlockPattern(seq_len, num_global, self.block, self.block, units.to(device), band=self.window)
