"""The ``flex_attention`` path of a :class:`~genolong.attention.pattern.BlockPattern`: the GPU path.

``torch.nn.attention.flex_attention`` with a ``BlockMask`` derived from the pattern (cached per pattern),
compiled once per shape and shared. On CPU it has no backward pass, and the first call costs a compile of
about 20-30 s, a few seconds more for each new shape: feed flex a few fixed shapes. It agrees with
:func:`~genolong.attention.paths.dense_attention` to rounding error (tested).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from genolong.attention.alibi import alibi_distance
from genolong.attention.paths import PatternInputs
from genolong.attention.pattern import BlockPattern

logger = logging.getLogger("genolong.attention")

#: Token tile of flex_attention's BlockMask (its default, and the GPU kernels' tile).
FLEX_BLOCK_SIZE = 128

_compiled_shapes: set[tuple] = set()
_backend = ["AUTO"]  # flex_attention's kernel_options["BACKEND"]; set by flex_backend
_block_masks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # BlockPattern -> BlockMask


#: Shapes (batch, heads, lengths, dtype, device) flex may compile for in one process. Past torch's default
#: of 8, reached by a model serving a few lengths, dynamo would silently run an uncompiled flex_attention
#: that materialises the whole (L, L) score matrix (many times slower, out of memory at long lengths).
MAX_COMPILED_SHAPES = 64


@lru_cache(maxsize=1)
def _compiled_flex():
    import torch._dynamo

    dynamo = torch._dynamo.config
    dynamo.recompile_limit = max(dynamo.recompile_limit, MAX_COMPILED_SHAPES)
    if hasattr(dynamo, "fail_on_recompile_limit_hit"):  # past the limit: an error, never the eager fallback
        dynamo.fail_on_recompile_limit_hit = True
    return torch.compile(flex_attention, dynamic=False)


@contextmanager
def flex_backend(name: str) -> Iterator[None]:
    """Run flex_attention with kernel backend ``name`` inside the block: ``"AUTO"`` (torch's choice, the
    default), ``"TRITON"`` or ``"FLASH"`` (the FlashAttention CuTe kernel, where its package is installed; an
    error at the first call where it is not). For benchmarks; models always run with ``"AUTO"``."""
    previous, _backend[0] = _backend[0], name
    try:
        yield
    finally:
        _backend[0] = previous


def flex_block_mask(pattern: BlockPattern, block: int = FLEX_BLOCK_SIZE):
    """The ``BlockMask`` of ``pattern`` on its device: tiles of ``block`` x ``block`` tokens.

    The pattern (but the band, judged from each cell's nearest and farthest pair) is constant on cells
    of ``r = gcd(G, bq, u, block)`` x ``r`` tokens, so it is evaluated once per cell. Tiles whose every
    pair is visible become *full* (no ``mask_mod`` call), those with some visible pairs *partial*.
    """
    length, num_keys, hp, device = pattern.seq_len, pattern.num_keys, pattern.heads, pattern.device
    q_tiles, k_tiles = -(-length // block), -(-num_keys // block)
    cell = math.gcd(pattern.num_global, pattern.query_block, pattern.unit, block)
    q = torch.arange(0, q_tiles * block, cell, device=device)[None, :, None]  # cell corners
    kv = torch.arange(0, k_tiles * block, cell, device=device)[None, None, :]
    visible = pattern.mask_mod(with_band=False)(None, torch.arange(hp, device=device)[:, None, None], q, kv)
    visible = visible & (q < length) & (kv < num_keys)  # (Hp, q cells, k cells)
    every = visible
    if pattern.band is not None:
        banded = (q >= pattern.num_global) & (kv >= pattern.num_global) & (kv < length)
        distance = (q - kv).abs()
        visible = visible & (~banded | (distance - (cell - 1) <= pattern.band))  # nearest pair
        every = every & (~banded | (distance + (cell - 1) <= pattern.band))  # farthest pair
    per_tile = block // cell
    any_tile = visible.view(hp, q_tiles, per_tile, k_tiles, per_tile).any(4).any(2)
    full = every.view(hp, q_tiles, per_tile, k_tiles, per_tile).all(4).all(2)
    partial = any_tile & ~full

    def ordered(tiles):  # count and indices of the selected tiles, selected ones first
        order = torch.argsort(tiles.to(torch.int8), dim=-1, descending=True, stable=True)
        return tiles.sum(-1, dtype=torch.int32)[None], order.to(torch.int32)[None]

    return BlockMask.from_kv_blocks(
        *ordered(partial),
        *ordered(full),
        BLOCK_SIZE=block,
        mask_mod=pattern.mask_mod(),
        seq_lengths=(q_tiles * block, k_tiles * block),  # whole tiles: see flex_attention_path
    )


def _flex_layout(pattern: BlockPattern):
    """``(pad, BlockMask)``: flex runs ``pattern`` with ``pad`` masked tokens after the globals, aligning
    the non-global tokens to the cells of :func:`flex_block_mask` (one global token would make every cell
    one token wide)."""
    if pattern not in _block_masks:
        pad = -pattern.num_global % math.gcd(pattern.query_block, pattern.unit, FLEX_BLOCK_SIZE)
        _block_masks[pattern] = pad, flex_block_mask(pattern.with_global_padding(pad))
    return _block_masks[pattern]


def _insert(x: torch.Tensor, at: int, count: int, value) -> torch.Tensor:
    """``x`` with ``count`` entries of ``value`` inserted at position ``at`` of dim 2."""
    filler = torch.full((*x.shape[:2], count, *x.shape[3:]), value, dtype=x.dtype, device=x.device)
    return torch.cat([x[:, :, :at], filler, x[:, :, at:]], dim=2)


def flex_attention_path(inputs: PatternInputs, dropout_p: float = 0.0) -> torch.Tensor:
    """Compiled ``flex_attention`` over the pattern's ``BlockMask``; padding and ALiBi's bias via a
    ``score_mod``. ``dropout_p`` must be 0 (flex has no attention dropout).

    Queries and keys are padded at the end to whole tiles of :data:`FLEX_BLOCK_SIZE` (the extra keys
    masked, the extra rows dropped): torch 2.13's CPU kernel applies ``score_mod`` and ``mask_mod`` to a
    last, partial key tile with the stride of a whole tile, so the output would depend on stale buffer
    contents (wrong values or NaN). The first call for each new shape compiles, logging a warning and
    then the compile time.
    """
    if dropout_p:
        raise ValueError(f"flex_attention has no attention dropout, got dropout_p={dropout_p}")
    q, key_valid = inputs.q, inputs.key_valid
    g, length = inputs.pattern.num_global, q.shape[2]
    pad, block_mask = _flex_layout(inputs.pattern)
    keys, values = inputs.keys, inputs.values
    slopes, positions = inputs.slopes, inputs.positions
    tail = -(keys.shape[2] + pad) % FLEX_BLOCK_SIZE
    if positions is not None:  # (L + pad + E + tail,): the padding is positionless
        positions = F.pad(_insert(positions[None, None], g, pad, -1.0), (0, tail), value=-1.0)[0, 0]
    if pad or tail:
        if key_valid is None:
            key_valid = torch.ones(q.shape[0], 1, keys.shape[2], dtype=torch.bool, device=q.device)
        q, keys, values = (_insert(x, g, pad, 0.0) for x in (q, keys, values))
        key_valid = F.pad(_insert(key_valid, g, pad, False), (0, tail), value=False)
        keys, values = (F.pad(x, (0, 0, 0, tail)) for x in (keys, values))
        q = F.pad(q, (0, 0, 0, -q.shape[2] % FLEX_BLOCK_SIZE))
    score_mod = None
    if key_valid is not None or positions is not None:
        shared = key_valid is None or key_valid.shape[1] == 1

        def score_mod(score, b, h, q_idx, kv_idx):
            if positions is not None:
                score = score - slopes[h] * alibi_distance(positions[q_idx], positions[kv_idx])
            if key_valid is None:
                return score
            return torch.where(key_valid[b, 0 if shared else h, kv_idx], score, float("-inf"))

    backend = _backend[0]
    shape_key = (tuple(q.shape), tuple(keys.shape), q.dtype, q.device.type, key_valid is None, slopes is None, backend)
    first = shape_key not in _compiled_shapes
    if first:
        logger.warning("flex_attention: compiling for q %s, keys %s, %s on %s; the first call takes "
                       "~20-30 s on CPU (seconds on GPU), and every new shape compiles again",
                       tuple(q.shape), tuple(keys.shape), q.dtype, q.device.type)
        started = time.perf_counter()
    options = None if backend == "AUTO" else {"BACKEND": backend}
    out = _compiled_flex()(q, keys, values, score_mod=score_mod, block_mask=block_mask, kernel_options=options)
    if first:
        _compiled_shapes.add(shape_key)
        logger.warning("flex_attention: first call for this shape took %.1f s", time.perf_counter() - started)
    return torch.cat([out[:, :, :g], out[:, :, g + pad : pad + length]], dim=2)
