"""The backbone contract: :class:`Attention`, the base class of every registered attention.

Construction and call (all tensors on one device and in one dtype)::

    attn = build_attention(config, layer_idx)   # validates, then cls(config, layer_idx)
    out = attn(q, k, v, padding_mask)           # q, k, v, out: (B, H, L, D)
                                                # padding_mask: (B, L) bool, True = real token, or None

``config`` is a :class:`~genolong.model.configuration.GenolongConfig`, or any object with the fields of
``cls.config_defaults`` plus ``num_attention_heads``, ``hidden_size``, ``max_position_embeddings`` and
``attention_probs_dropout_prob``. ``layer_idx`` seeds per-layer randomness as ``attention_seed + layer_idx``.
A subclass implements ``forward`` and overrides the class attributes and classmethods whose defaults do
not fit: what the attention is, what it needs from the encoder (:mod:`genolong.model.encoder` and
:mod:`genolong.model.modeling` read these and know no backbone by name) and how a short full-attention
model converts to it (:mod:`genolong.convert.long`). A backbone that changes the encoder itself (VCC,
SLED) registers its model classes in :mod:`genolong.model.backbones`: the attention names no model class.

Global tokens always come first in the sequence the attention sees: the prepended ones, or for
BigBird-ITC the first ``num_global_blocks`` blocks. The first token must be real (padding goes at the
end), so that every query sees a real key. Padded positions receive outputs that never affect real tokens.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch
from torch import nn

from genolong.attention.alibi import alibi_bias, alibi_slopes, bias_dtype
from genolong.core.errors import ConfigError
from genolong.core.values import is_integer


class Attention(nn.Module, ABC):
    """Base class of the registered attentions, with the contract's defaults (module docstring).

    Shapes: q, k, v (B, H, L, D); padding_mask (B, L) bool, True = real, or None; output (B, H, L, D).
    """

    #: The registry name, set by :func:`genolong.attention.register_attention`.
    attention_name: ClassVar[str] = "attention"
    #: The parameters under the papers' names, with defaults; ``GenolongConfig`` merges them into itself.
    config_defaults: ClassVar[dict[str, Any]] = {}
    #: Whether ``forward`` is exact with fewer queries than keys (the first tokens): a classifier's last
    #: layer may then compute [CLS] alone.
    accepts_query_subset: ClassVar[bool] = False
    #: The keyword under which a masked-LM model passes the masked positions ``(B, L)`` bool to the
    #: encoder (VCC's ``vip_mask``), or None.
    masked_tokens_input: ClassVar[str | None] = None
    #: Whether a conversion to long inputs copies the position table up to the new length (not SLED's).
    extends_positions: ClassVar[bool] = True
    #: The ``position_embedding_type`` values computed exactly: ``absolute`` and ``rotary`` are applied
    #: outside the attention; ``alibi`` when ``forward`` adds :meth:`alibi_bias` to the scores.
    position_types: ClassVar[tuple[str, ...]] = ("absolute", "rotary")

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__()
        self.layer_idx = layer_idx
        self.dropout = float(getattr(config, "attention_probs_dropout_prob", 0.0))
        #: learned global tokens the encoder prepends, positionless for rotary and ALiBi (the
        #: backbone's: :func:`~genolong.attention.build_attention` sets it in a per-layer plan's full layers)
        self.num_prepended = self.num_extra_global_tokens(config)
        alibi = getattr(config, "position_embedding_type", "absolute") == "alibi"
        #: (H,) float32 ALiBi slopes, or None without ALiBi
        self.alibi_slopes: torch.Tensor | None
        self.register_buffer("alibi_slopes", alibi_slopes(config.num_attention_heads).float() if alibi else None,
                             persistent=False)

    def alibi_bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor,
                   dtype: torch.dtype) -> torch.Tensor | None:
        """The (H, Q, K) ALiBi bias in ``dtype`` for (Q,) query and (K,) key positions
        (:func:`~genolong.attention.alibi.alibi_bias`), or None without ALiBi."""
        if self.alibi_slopes is None:
            return None
        return alibi_bias(self.alibi_slopes.to(bias_dtype(dtype)), query_positions, key_positions).to(dtype)

    @torch.no_grad()
    def reset_buffers(self) -> None:
        """Recompute the ALiBi slopes in place: they are not saved, and ``from_pretrained`` builds
        the model without running ``__init__``'s values into them (the weight init calls this)."""
        if self.alibi_slopes is not None:
            self.alibi_slopes.copy_(alibi_slopes(self.alibi_slopes.shape[0]))

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """Raise ConfigError for an impossible setting (never fall back to full attention); by default
        every setting is possible."""

    @classmethod
    def num_extra_global_tokens(cls, config: Any) -> int:
        """Learned global tokens the encoder prepends (BigBird-ETC, Longformer, LSG); none by default."""
        return 0

    @classmethod
    def length_multiple(cls, config: Any) -> int:
        """The encoder pads the sequence (after the prepended tokens) to a multiple of this, marking the
        padding False in ``padding_mask``; any length by default."""
        return 1

    @classmethod
    def max_input_length(cls, config: Any) -> int | None:
        """The longest input in tokens: one position per token by default; None: any length (SLED)."""
        return int(config.max_position_embeddings)

    @classmethod
    def long_settings(cls, trained: int, max_length: int | None, block_size: int | None,
                      global_tokens: int) -> dict[str, Any]:
        """Config fields (``max_position_embeddings`` among them) of a full-attention model of ``trained``
        positions that reads ``max_length`` tokens with this attention; ``block_size`` None: the default.
        A backbone without it is no conversion target."""
        raise ConfigError(f"--backbone {cls.attention_name}: no conversion from full attention to it")

    @classmethod
    def long_reading(cls, config: Any) -> str:
        """How a query reads a long input, for the conversion's log line."""
        return f"{cls.attention_name} attention"

    @abstractmethod
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, H, L, D) queries, keys and values -> (B, H, L, D) outputs."""


def check_position_type(cls: type[Attention], config: Any) -> None:
    """Raise ConfigError when ``config.position_embedding_type`` is not one of ``cls.position_types``."""
    kind = getattr(config, "position_embedding_type", "absolute")
    if kind not in cls.position_types:
        raise ConfigError(f"{cls.attention_name} attention does not support position_embedding_type {kind!r} "
                          f"(it supports {', '.join(cls.position_types)})")


def long_length(backbone: str, trained: int, max_length: int | None, unit: int = 1, unit_name: str = "") -> int:
    """``max_length`` of a conversion to ``backbone`` (:meth:`Attention.long_settings`), checked: at least
    the ``trained`` positions, a multiple of ``unit`` (the backbone's ``unit_name``: block size...)."""
    if max_length is None or max_length < trained:
        raise ConfigError(f"--backbone {backbone} needs --max-length N >= the {trained} trained positions")
    if max_length % unit:
        raise ConfigError(f"--max-length {max_length} is not a multiple of {unit}, the {backbone} {unit_name}")
    return max_length


def require_int(config: Any, name: str, minimum: int, backbone: str) -> int:
    """``config.<name>`` as an int ``>= minimum``, or a ConfigError that names the field."""
    value = getattr(config, name)
    if not is_integer(value, minimum):
        raise ConfigError(f"{backbone}: {name} must be an integer >= {minimum}, got {value!r}")
    return value

