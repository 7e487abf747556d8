"""A short full-attention model made long: LSG's conversion (Condevaux & Harispe 2023, §3.3-3.4;
user guide: ``docs/guide/long-context.md``).

:func:`make_long` takes the GenolongConfig fields and state dict of a ``full`` model with P
trained positions and returns those of the same model with:

* **the attention swapped** (§5: "other elements are not modified"), with the settings its
  class gives (:meth:`~genolong.attention.base.Attention.long_settings`, which also checks the
  block size against P, §A/E): this module names no backbone;
* **the position table copied** up to N (§3.4, as Longformer did): row ``j`` of the new (N, H)
  table is row ``j mod P`` of the trained (P, H) one (rotary or ALiBi positions have no table);
* **G global tokens** initialised as LSG §3.3: global 0 = [CLS] + position 0, global i > 0 =
  [MASK] + position ``reorder(i)`` (the authors' stride of 64: 0, 64, 128, ..., then 1, 65, ...),
  through the embedding LayerNorm, as genolong prepends them after it.

With no global tokens, an input the pattern covers whole (lsg and bigbird: two blocks;
longformer: one-sided window + 1 tokens; sled: one chunk) gives the source model's outputs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from genolong.attention import attention_class, available_attentions
from genolong.attention.base import Attention
from genolong.config.presets import switch_backbone
from genolong.convert.source import ConversionError
from genolong.core.errors import ConfigError
from genolong.model.configuration import GenolongConfig

log = logging.getLogger(__name__)

#: The authors' ``global_positional_stride`` (LSG code): global i takes the position reorder(i).
GLOBAL_POSITION_STRIDE = 64
POSITIONS = "genolong.encoder.embeddings.position.weight"
TOKENS = "genolong.encoder.embeddings.token.weight"


@dataclass(frozen=True)
class LongSpec:
    """What ``genolong convert --backbone`` asks for (a backbone of :func:`long_backbones`),
    ``global_tokens`` G learned global (sled: prefix) tokens.

    Attributes:
        max_length: N, the new position count (lsg, bigbird, longformer); None for sled.
        block_size: lsg / bigbird block size; longformer's one-sided window (attention_window / 2);
            sled's chunk size. None: the backbone's default.
    """

    backbone: str
    max_length: int | None = None
    block_size: int | None = None
    global_tokens: int = 0

    def __post_init__(self) -> None:
        if self.backbone not in long_backbones():
            raise ConversionError(f"--backbone must be one of {', '.join(long_backbones())}, got {self.backbone!r}")
        if self.global_tokens < 0:
            raise ConversionError(f"--global-tokens {self.global_tokens}: a count of tokens, 0 or more")


def long_backbones() -> list[str]:
    """The registered backbones a full-attention model converts to: those whose attention class
    declares :meth:`~genolong.attention.base.Attention.long_settings`."""
    return [name for name in available_attentions()
            if attention_class(name).long_settings.__func__ is not Attention.long_settings.__func__]


def make_long(fields: dict[str, Any], state: dict[str, torch.Tensor], spec: LongSpec) -> tuple[dict, dict]:
    """``(fields, state)`` of the long model (module docstring; the inputs are not modified):
    the position table (N, H) under :data:`POSITIONS`, ``global_tokens`` (G, H) when G > 0, and
    ``trained_positions = P`` in the fields. A one-line ConversionError for a source that is not
    ``full`` attention (or whose local layers have their own rotary base), N not a multiple of the
    block (or below P), a block too large for P, or global tokens the backbone cannot have.
    """
    backbone = spec.backbone
    trained = int(state[POSITIONS].shape[0]) if POSITIONS in state else int(fields["max_position_embeddings"])
    if fields.get("backbone", "full") != "full" and not fields.get("full_attention_layers"):
        raise ConversionError(f"--backbone {backbone} converts a full-attention model; the source has backbone "
                              f"{fields['backbone']!r}")
    try:
        settings = attention_class(backbone).long_settings(trained, spec.max_length, spec.block_size,
                                                           spec.global_tokens)
    except ConfigError as err:
        raise ConversionError(err.message, hint=err.hint) from None
    local_base = fields.get("local_rotary_base")
    if fields.get("full_attention_layers") and local_base not in (None, fields.get("rotary_base")):
        raise ConversionError(f"--backbone {backbone} gives every layer one rotary base; this model's local-window "
                              f"layers rotate with base {local_base:g}, its global layers with "
                              f"{fields['rotary_base']:g}")
    if spec.global_tokens and fields.get("local_conv_kernel"):
        raise ConversionError("--global-tokens needs a model without local_conv_kernel (the convolution mixes "
                              "neighbouring tokens into every embedding)")
    length = settings["max_position_embeddings"]
    overrides = {"backbone": backbone, "max_position_embeddings": length, "trained_positions": trained,
                 "full_attention_layers": None, "local_rotary_base": None} | settings
    fields = switch_backbone({"backbone": "full"} | fields, overrides)
    try:
        GenolongConfig(**fields)
    except ConfigError as err:
        raise ConversionError(f"--backbone {backbone} --max-length {length}: {err.message}") from None
    state = dict(state)
    if POSITIONS in state:
        state[POSITIONS] = extend_positions(state[POSITIONS], length)
    if spec.global_tokens:
        state["genolong.encoder.global_tokens"] = lsg_global_tokens(fields, state, spec.global_tokens, trained)
    return fields, state


def extend_positions(position: torch.Tensor, length: int) -> torch.Tensor:
    """(P, H) trained rows -> (length, H): copies of the table concatenated, row j = row j mod P (§3.4)."""
    trained = position.shape[0]
    return position.repeat(-(-length // trained), 1)[:length].clone()


def global_positions(count: int, trained: int) -> list[int]:
    """The position rows of the ``count`` global tokens: the authors' stride order 0, 64, 128, ...
    (< P), 1, 65, ...; global i takes entry i."""
    stride = min(GLOBAL_POSITION_STRIDE, trained)
    order = [offset + step for offset in range(stride) for step in range(0, trained, stride) if offset + step < trained]
    return [order[i % len(order)] for i in range(count)]


@torch.no_grad()
def lsg_global_tokens(fields: dict[str, Any], state: dict[str, torch.Tensor], count: int, trained: int) -> torch.Tensor:
    """(G, H) global tokens of LSG §3.3 (module docstring)."""
    for name in ("cls_token_id", "mask_token_id"):
        if fields.get(name) is None:
            raise ConversionError(f"--global-tokens needs the tokenizer's {name.removesuffix('_id')} "
                                  "(LSG initialises global tokens from [CLS] and [MASK])")
    token_ids = [fields["cls_token_id"]] + [fields["mask_token_id"]] * (count - 1)
    rows = state[TOKENS][token_ids]  # (G, H)
    if POSITIONS in state:
        rows = rows + state[POSITIONS][global_positions(count, trained)]
    weight, bias = state.get("genolong.encoder.embeddings.norm.weight"), state.get("genolong.encoder.embeddings.norm.bias")
    if weight is None:
        return rows.clone()
    return torch.nn.functional.layer_norm(rows, rows.shape[-1:], weight, bias, fields.get("layer_norm_eps", 1e-12))


def describe_long(config: GenolongConfig) -> str:
    """One line for the log: what the conversion did to positions, attention and global tokens."""
    trained = getattr(config, "trained_positions", config.max_position_embeddings)
    backbone, length, attention = config.backbone, config.max_position_embeddings, attention_class(config.backbone)
    if not attention.extends_positions:
        return f"{backbone}: {attention.long_reading(config)}"
    globals_ = attention.num_extra_global_tokens(config)
    copied = (f"rows {trained}..{length - 1} copy rows 0..{trained - 1}" if config.position_embedding_type == "absolute"
              else f"{config.position_embedding_type} positions continue")
    return (f"{backbone}: positions {trained} -> {length} ({copied}), "
            f"{attention.long_reading(config)}, {globals_} added global token{'s' if globals_ != 1 else ''}")
