"""The shared forward of the block-sparse attentions (BigBird, Longformer, LSG).

A subclass says what its pattern is (:meth:`BlockSparseAttention.build_pattern`, cached per length and
device; LSG adds extra keys with :meth:`~BlockSparseAttention.sparse_tokens`); the base class picks the
execution path (:func:`~genolong.attention.paths.choose_path`) and runs it. Absolute and rotary positions
are applied before the attention; ALiBi inside each path, from the positions of every key: the sequence's
(prepended global tokens positionless, then 0, 1, ...) and the extra keys'
(:meth:`~BlockSparseAttention.extra_positions`).

Randomness (BigBird's random blocks, LSG's LSH projections, :meth:`~BlockSparseAttention.register_draws`)
is drawn once at construction from a ``torch.Generator`` seeded with ``attention_seed + layer_idx`` and
stored as a persistent buffer, so a saved model and ``eval()`` use the layout it was trained with. With
``redraw_random_per_step=True`` every training forward draws afresh from that generator; evaluation
still uses the stored draw. The global RNG is never touched.
"""

from __future__ import annotations

from abc import abstractmethod
from functools import partial
from typing import Any, ClassVar

import torch

from genolong.attention.alibi import bias_dtype, token_positions
from genolong.attention.base import Attention, require_int
from genolong.attention.flex import flex_attention_path
from genolong.attention.paths import (
    IMPLEMENTATIONS,
    PatternInputs,
    choose_path,
    dense_attention,
    gather_attention,
)
from genolong.attention.pattern import BlockPattern
from genolong.core.errors import ConfigError

#: Patterns (sequence lengths x devices) each attention layer keeps.
MAX_CACHED_PATTERNS = 16

#: The execution paths by the name :func:`~genolong.attention.paths.choose_path` returns.
PATHS = {"flex": flex_attention_path, "gather": gather_attention, "dense": dense_attention}

#: Parameters every block-sparse backbone understands.
SHARED_DEFAULTS: dict[str, Any] = {"attention_impl": "auto"}  # auto | flex | gather | dense (attention.paths)

#: Parameters of the backbones with a random part.
RANDOM_DEFAULTS: dict[str, Any] = {
    "attention_seed": 0,  # layer i draws from a generator seeded with attention_seed + i
    "redraw_random_per_step": False,  # False: one layout per layer, fixed at init and saved
}


class BlockSparseAttention(Attention):
    """Base class: pattern caching, path choice and the one forward.

    Shapes: q, k, v ``(B, H, L, D)``; padding_mask ``(B, L)`` bool, True = real token, or None;
    output ``(B, H, L, D)``. The first ``pattern_for(L).num_global`` tokens are global.
    """

    attention_name = "block-sparse"
    position_types = ("absolute", "rotary", "alibi")
    config_defaults: dict[str, Any] = dict(SHARED_DEFAULTS)
    #: The block size of a conversion to long inputs (the paper's default) before the cap of :meth:`long_block`.
    long_block_default: ClassVar[int] = 64

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.num_heads = int(config.num_attention_heads)
        self.attention_impl = getattr(config, "attention_impl", "auto")
        self.redraw_random_per_step = bool(getattr(config, "redraw_random_per_step", False))
        self._draw_kinds: dict[str, str] = {}  # buffer name -> "uniform" or "normal"
        self._patterns: dict[tuple, BlockPattern] = {}

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """Raise ConfigError for settings shared by every block-sparse backbone."""
        impl = getattr(config, "attention_impl", "auto")
        if impl not in IMPLEMENTATIONS:
            raise ConfigError(f"{cls.attention_name}: unknown attention_impl {impl!r}; "
                              f"choose one of: {', '.join(IMPLEMENTATIONS)}")
        require_int(config, "num_attention_heads", 1, cls.attention_name)
        require_int(config, "max_position_embeddings", 1, cls.attention_name)

    @classmethod
    def long_block(cls, trained: int, block_size: int | None) -> int:
        """The block of a conversion from ``trained`` positions: at most half of them, so that local
        attention (up to 2 blocks - 1 tokens away) stays inside the trained distances (LSG §A/E);
        ``block_size`` None: :attr:`long_block_default` capped there."""
        block = min(cls.long_block_default, trained // 2) if block_size is None else block_size
        if not 1 <= block <= trained // 2:
            raise ConfigError(
                f"{cls.attention_name}: --block-size {block} is larger than half the {trained} trained positions "
                f"(at most {trained // 2}): local attention would reach distances the model never saw (LSG §A)")
        return block

    @classmethod
    def long_reading(cls, config: Any) -> str:
        return f"block {config.block_size}"

    @abstractmethod
    def build_pattern(self, seq_len: int, device: torch.device) -> BlockPattern:
        """The pattern for a sequence of ``seq_len`` tokens (globals included), on ``device``."""

    def sparse_tokens(self, k: torch.Tensor, v: torch.Tensor, real: torch.Tensor | None):
        """Extra keys computed from the non-global keys and values ``(B, H, N, D)`` and ``real`` ``(B, N)``
        bool or None (LSG): ``(extra_k, extra_v, extra_valid)`` of shapes ``(B, H, E, D)``, ``(B, H, E, D)``
        and ``(B, Hm, E)`` bool or None; None for the others."""
        return None

    def extra_keys(self, k: torch.Tensor, v: torch.Tensor, padding_mask: torch.Tensor | None, num_global: int):
        """The extra keys (as :meth:`sparse_tokens` returns them) from the whole sequence ``(B, H, L, D)``
        whose first ``num_global`` tokens are global; by default :meth:`sparse_tokens` of the rest."""
        real = None if padding_mask is None else padding_mask[:, num_global:]
        return self.sparse_tokens(k[:, :, num_global:], v[:, :, num_global:], real)

    def extra_positions(self, positions: torch.Tensor, num_global: int, num_extra: int) -> torch.Tensor:
        """``(E,)`` ALiBi positions of the ``num_extra`` extra keys, from the ``(L,)`` float positions of
        the sequence whose first ``num_global`` tokens are global; a subclass with extra keys defines it."""
        if num_extra:
            raise NotImplementedError(f"{type(self).__name__} has extra keys, so it must define "
                                      "extra_positions for ALiBi")
        return positions[:0]

    #: Whether the pattern depends on the random draws (then it is rebuilt when they change).
    pattern_uses_draws = False

    def register_draws(self, name: str, kind: str, shape: tuple[int, ...], config: Any) -> None:
        """Draw ``shape`` numbers (``kind`` = ``uniform`` on [0, 1) or standard ``normal``) from the
        layer's generator, seeded with ``attention_seed + layer_idx``, as persistent buffer ``name``."""
        if not hasattr(self, "generator"):
            self.generator = torch.Generator().manual_seed(int(config.attention_seed) + self.layer_idx)
        self._draw_kinds[name] = kind
        self.register_buffer(name, self._sample(name, shape))

    def _sample(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        sample = {"uniform": torch.rand, "normal": torch.randn}[self._draw_kinds[name]]
        return sample(shape, generator=self.generator, device="cpu")

    def draws(self, name: str) -> torch.Tensor:
        """Buffer ``name``, or a fresh draw from the layer's generator in a training step when
        ``redraw_random_per_step`` is set."""
        stored = getattr(self, name)
        if self.training and self.redraw_random_per_step:
            return self._sample(name, tuple(stored.shape)).to(stored.device)
        return stored

    def pattern_for(self, seq_len: int, device: torch.device) -> BlockPattern:
        """The (cached) pattern for ``seq_len`` tokens on ``device``."""
        if self.pattern_uses_draws and self.training and self.redraw_random_per_step:
            return self.build_pattern(seq_len, device)
        key: tuple = (seq_len, str(device))
        if self.pattern_uses_draws:  # a moved or modified buffer invalidates the cache
            key += tuple((b.data_ptr(), _version(b)) for b in self.buffers(recurse=False))
        if key not in self._patterns:
            self._patterns = {k: p for k, p in self._patterns.items() if k[:2] != key[:2]}
            if len(self._patterns) >= MAX_CACHED_PATTERNS:  # forget the oldest length
                del self._patterns[next(iter(self._patterns))]
            self._patterns[key] = self.build_pattern(seq_len, device)
        return self._patterns[key]

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        # loading copies into the buffers in place; under inference_mode that bumps no version
        self._patterns = {}
        super()._load_from_state_dict(*args, **kwargs)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                padding_mask: torch.Tensor | None = None,
                positions: torch.Tensor | None = None) -> torch.Tensor:
        """Sparse attention of ``q`` over ``k``/``v``: ``(B, H, L, D)`` -> ``(B, H, L, D)``. With ALiBi,
        ``positions`` ``(L,)`` are the tokens' positions in the order given (default
        :func:`~genolong.attention.alibi.token_positions`)."""
        heads, length = q.shape[1:3]
        if heads != self.num_heads:
            raise ValueError(f"{self.attention_name}: built for {self.num_heads} heads, got {heads}")
        pattern = self.pattern_for(length, q.device)
        extra = self.extra_keys(k, v, padding_mask, pattern.num_global)
        extra_k, extra_v, extra_valid = (None, None, None) if extra is None else extra
        num_extra = 0 if extra_k is None else extra_k.shape[2]
        key_valid = _key_validity(padding_mask, extra_valid, length, num_extra, q.device)
        dropout = self.dropout if self.training else 0.0
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
        path = choose_path(self.attention_impl, self.attention_name, q.device, q.dtype, needs_grad, dropout)
        slopes = key_positions = None
        if self.alibi_slopes is not None:
            wide = bias_dtype(q.dtype)
            slopes = self.alibi_slopes.to(wide)
            sequence = (token_positions(length, self.num_prepended, q.device) if positions is None else positions).to(wide)
            key_positions = torch.cat([sequence, self.extra_positions(sequence, pattern.num_global, num_extra)])
        inputs = PatternInputs(q, k, v, pattern, key_valid, extra_k, extra_v, slopes, key_positions)
        return PATHS[path](inputs, dropout)


def _version(tensor: torch.Tensor) -> int:
    """The in-place modification counter of ``tensor``; -1 for an inference tensor (one made
    under ``torch.inference_mode()``), which has none."""
    return -1 if tensor.is_inference() else tensor._version


def _key_validity(padding_mask: torch.Tensor | None, extra_valid: torch.Tensor | None, length: int,
                  num_extra: int, device: torch.device) -> torch.Tensor | None:
    """``(B, Hm, L + E)`` bool, True = a real key: the sequence's padding mask, then the extra
    keys' validity ``(B, Hm, E)``; None when every key is real."""
    if padding_mask is None and extra_valid is None:
        return None
    ones = partial(torch.ones, dtype=torch.bool, device=device)
    sequence = ones(1, 1, length) if padding_mask is None else padding_mask[:, None]
    extra = ones(1, 1, num_extra) if extra_valid is None else extra_valid
    batch, heads = max(sequence.shape[0], extra.shape[0]), max(sequence.shape[1], extra.shape[1])
    return torch.cat([sequence.expand(batch, heads, -1), extra.expand(batch, heads, -1)], dim=2)
