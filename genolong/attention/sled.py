"""The attention of SLED's chunk encoder, and SLED's parameters (Ivgi, Shaham & Berant 2022,
"Efficient Long-Text Understanding with Short-Text Models", arXiv 2208.00748).

SLED is a *model* wrapper: :class:`genolong.model.sled.SledEncoder` cuts the input into overlapping
chunks and runs a short-context encoder on each (§3), with plain dense attention inside a chunk; so
backbone ``"sled"`` is :class:`~genolong.attention.full.FullAttention` with SLED's parameters:

* ``sled_chunk_size`` c = 256: tokens per chunk (the paper's default; §5.3 finds c <= 256 best);
* ``sled_context_padding`` alpha = 0.5: each chunk keeps its middle (1 - alpha) c tokens, with alpha c / 2
  tokens of context on each side (§3; §5.4 keeps 0.5; the SLED code's ``window_fraction`` is 1 - alpha);
* ``sled_fusion`` = "attention": how a classifier fuses the kept token vectors, replacing the paper's
  decoder: ``"attention"`` (a learned query cross-attends to them), ``"mean"``, ``"max"``, or ``"cls"``
  (the first chunk's [CLS] alone, for ablations);
* ``sled_prefix_tokens`` = 0: learned prefix tokens prepended to every chunk (§3 step (b)) as the
  encoder's extra global tokens, dropped from the kept outputs;
* ``sled_chunks_per_call`` = 0: chunks per encoder call; 0 all chunks of a batch in one call (the SLED
  code's ``stacked`` mode), 1 one at a time (``loop``, least memory).
"""

from __future__ import annotations

from typing import Any

from genolong.attention import register_attention
from genolong.attention.base import require_int
from genolong.attention.full import FullAttention
from genolong.core.errors import ConfigError
from genolong.core.values import is_number

FUSIONS = ("attention", "mean", "max", "cls")


@register_attention("sled")
class SledAttention(FullAttention):
    """Dense attention inside one SLED chunk (shapes as :class:`FullAttention`); a sequence classifier reads
    the :class:`~genolong.model.sled.SledFusion` of every kept token vector."""

    config_defaults: dict[str, Any] = {"sled_chunk_size": 256, "sled_context_padding": 0.5,
                                       "sled_fusion": "attention", "sled_prefix_tokens": 0,
                                       "sled_chunks_per_call": 0}
    extends_positions = False

    @classmethod
    def long_settings(cls, trained, max_length, block_size, global_tokens):
        """The trained positions kept, any length read in chunks of ``block_size`` <= P tokens
        (default min(256, P), Ivgi et al. 2023, §3); ``global_tokens`` prefix tokens."""
        if max_length is not None:
            raise ConfigError("--max-length does not apply to sled: it reads any length in chunks of "
                              f"--block-size <= {trained} tokens with the trained {trained} positions")
        chunk = min(256, trained) if block_size is None else block_size
        if not 1 <= chunk <= trained:
            raise ConfigError(f"sled: --block-size (the chunk size) {chunk} must be between 1 and the "
                              f"{trained} trained positions")
        return {"max_position_embeddings": trained, "sled_chunk_size": chunk, "sled_prefix_tokens": global_tokens}

    @classmethod
    def long_reading(cls, config: Any) -> str:
        trained = getattr(config, "trained_positions", config.max_position_embeddings)
        return (f"chunks of {config.sled_chunk_size} tokens with the trained {trained} positions, inputs of any "
                f"length; {config.sled_prefix_tokens} prefix tokens")

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """1 <= c <= max_position_embeddings, 0 <= alpha <= 0.5, a known fusion, counts >= 0."""
        require_int(config, "sled_chunk_size", 1, "sled")
        for name in ("sled_prefix_tokens", "sled_chunks_per_call"):
            require_int(config, name, 0, "sled")
        if config.sled_chunk_size > config.max_position_embeddings:
            raise ConfigError(
                f"sled: sled_chunk_size={config.sled_chunk_size} exceeds max_position_embeddings="
                f"{config.max_position_embeddings}: a chunk needs a position per token (SLED reads inputs of any "
                "length in chunks; its prefix tokens are prepended without positions)"
            )
        alpha = config.sled_context_padding
        if not is_number(alpha) or not 0.0 <= alpha <= 0.5:
            raise ConfigError(f"sled: sled_context_padding (alpha) must be in [0, 0.5], got {alpha!r}")
        if config.sled_fusion not in FUSIONS:
            raise ConfigError(f"sled: unknown sled_fusion {config.sled_fusion!r}; "
                              f"choose one of: {', '.join(FUSIONS)}")

    @classmethod
    def max_input_length(cls, config: Any) -> None:
        """Any length: only a chunk needs positions."""
        return None

    @classmethod
    def num_extra_global_tokens(cls, config: Any) -> int:
        """The learned prefix tokens, prepended to every chunk."""
        return config.sled_prefix_tokens
