"""Three ways to run a :class:`~genolong.attention.pattern.BlockPattern`, and the choice between them.

All three take the same arguments and agree to rounding error (tested):

* :func:`dense_attention`: the reference. It builds the full ``(L, L + E)`` mask and runs a plain
  masked softmax. It is quadratic in memory, so use it for tests and short inputs only.
* :func:`gather_attention`: portable and differentiable everywhere; the CPU path. For each
  non-global query block it gathers the global keys and the key and value units the pattern
  names, then runs softmax attention on ``(block, keys)`` pairs. In fp32 and fp64 this is
  ``scaled_dot_product_attention``, which is PyTorch's fused flash kernel on CPU, so no score
  matrix is written to memory. In bf16 and fp16 it is ``baddbmm``, softmax and ``bmm``,
  faster there (:func:`_attend`). Query blocks are processed in chunks of a few MiB, so that
  a chunk's working set stays in cache and the temporaries stay small enough for the
  allocator to reuse rather than page-fault.
* :func:`flex_attention_path`: ``torch.nn.attention.flex_attention`` with a ``BlockMask``
  derived from the pattern; compiled (``torch.compile``), and the compiled function is shared.
  It is the GPU path for training and inference. On CPU it has no backward pass, and it costs
  a compile on first use: about 20-30 s, and a few seconds more for each new shape (batch
  size or length). ``torch.compile`` keeps a limited number of compiled shapes per function,
  so feed flex a few fixed shapes.
  The ``BlockMask`` is cached per pattern, and the attention module caches its patterns per
  length and device.

:func:`choose_path` turns the ``attention_impl`` setting (``auto`` | ``flex`` | ``gather`` |
``dense``) into one of these. It logs the choice once per backbone, path, device and mode,
and raises :class:`~genolong.errors.ConfigError` for an impossible request, such as ``flex``
with a backward pass on CPU.

Shapes used throughout:
    q, k, v: ``(B, H, L, D)``; extra_k, extra_v: ``(B, H, E, D)`` or None; key_valid:
    ``(B, Hm, L + E)`` bool with ``Hm`` in ``{1, H}`` (True = a real key), or None; output
    ``(B, H, L, D)``.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from functools import lru_cache

import torch
import torch.nn.functional as F

from genolong.attention.pattern import BlockPattern
from genolong.errors import ConfigError

logger = logging.getLogger("genolong.attention")

IMPLEMENTATIONS = ("auto", "flex", "gather", "dense")

#: Bytes of gathered keys per chunk of query blocks in the gather path; a few MiB keeps a
#: chunk's keys, values and mask in the L2/L3 caches (4 MiB ran one BigBird layer faster than 8 or
#: 16 MiB on the development CPU: 25 vs 29 and 44 ms at 4K tokens).
GATHER_CHUNK_BYTES = 4 << 20

#: Token tile of flex_attention's BlockMask (its default, and the GPU kernels' tile).
FLEX_BLOCK_SIZE = 128

_logged: set[tuple] = set()


def choose_path(
    requested: str,
    backbone: str,
    device: torch.device,
    dtype: torch.dtype,
    needs_grad: bool,
    dropout_p: float,
) -> str:
    """Resolve ``attention_impl`` into ``flex``, ``gather`` or ``dense``, and log the choice once.

    ``auto`` picks ``flex`` on CUDA and ``gather`` elsewhere. On CPU, ``gather`` is faster than
    compiled flex at the sizes measured (``benchmarks/attention_kernels.py``), needs no compile,
    and has a backward pass. ``auto`` also picks ``gather`` when attention dropout is active,
    because flex has no dropout.

    Args:
        requested: the config's ``attention_impl``.
        backbone: the attention's registry name, for the log line.
        device: where q, k, v live.
        dtype: their dtype.
        needs_grad: whether autograd will need a backward pass through this call.
        dropout_p: the attention dropout probability in effect (0 at inference).

    Raises:
        ConfigError: ``flex`` with a backward pass on CPU, with float64 on CPU, or with attention
            dropout; an unknown name.
    """
    if requested not in IMPLEMENTATIONS:
        raise ConfigError(
            f"unknown attention_impl {requested!r}; choose one of: {', '.join(IMPLEMENTATIONS)}"
        )
    path = requested
    if requested == "auto":
        path = "flex" if device.type == "cuda" and dropout_p == 0 else "gather"
    if path == "flex" and needs_grad and device.type != "cuda":
        raise ConfigError(
            f"attention_impl='flex' cannot train on {device.type}: torch's flex_attention has no "
            "backward pass there; use attention_impl='gather' (or 'auto')"
        )
    if path == "flex" and dtype == torch.float64 and device.type != "cuda":
        raise ConfigError(
            f"attention_impl='flex' supports float32, bfloat16 and float16 on {device.type}, not float64; "
            "use attention_impl='gather' (or 'auto')"
        )
    if path == "flex" and dropout_p > 0:
        raise ConfigError(
            "attention_impl='flex' has no attention dropout; set attention_probs_dropout_prob=0 "
            "or use attention_impl='gather' (or 'auto')"
        )
    key = (backbone, path, device.type, needs_grad)
    if key not in _logged:
        _logged.add(key)
        mode = "training" if needs_grad else "inference"
        logger.info(
            "%s attention: %s path on %s for %s (attention_impl=%r)",
            backbone,
            path,
            device.type,
            mode,
            requested,
        )
    return path


def run_path(
    path: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: BlockPattern,
    key_valid: torch.Tensor | None = None,
    extra_k: torch.Tensor | None = None,
    extra_v: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Run ``pattern`` with the path named ``path`` (``flex``, ``gather`` or ``dense``)."""
    if path == "flex":
        return flex_attention_path(q, k, v, pattern, key_valid, extra_k, extra_v)
    run = gather_attention if path == "gather" else dense_attention
    return run(q, k, v, pattern, key_valid, extra_k, extra_v, dropout_p)


def _with_extra(x: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
    return x if extra is None else torch.cat([x, extra], dim=2)


# --------------------------------------------------------------------------- dense reference


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: BlockPattern,
    key_valid: torch.Tensor | None = None,
    extra_k: torch.Tensor | None = None,
    extra_v: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Masked softmax attention over the pattern's dense ``(L, L + E)`` mask: the reference.

    A query with no visible key (possible only for padding) gets a zero output, as in
    ``scaled_dot_product_attention``.
    """
    keys, values = _with_extra(k, extra_k), _with_extra(v, extra_v)  # (B, H, L+E, D)
    mask = pattern.dense_mask()[None]  # (1, Hp, L, L+E)
    if key_valid is not None:
        mask = mask & key_valid[:, :, None, :]
    scores = (q @ keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, L, L+E)
    probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    probs = torch.where(mask.any(dim=-1, keepdim=True), probs, 0.0)
    return F.dropout(probs, dropout_p) @ values


# --------------------------------------------------------------------------- gathered blocks


def _gather_units(table: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
    """Pick units of a table: ``(B, Ht, T+1, ...)`` with ``(Hi, c, S)`` -> ``(B, max(Ht, Hi), c, S, ...)``.

    ``Ht`` and ``Hi`` are each 1 (shared by all heads) or the number of heads. One
    ``index_select``, whose backward is a single ``index_add``.
    """
    batch, table_heads, rows = table.shape[:3]
    heads = max(table_heads, units.shape[0])
    if table_heads > 1:  # address unit t of head h as row h * rows + t of the flattened table
        units = units.expand(heads, -1, -1) + rows * torch.arange(heads, device=units.device)[:, None, None]
    rows_of = table.flatten(1, 2)  # (B, Ht * (T+1), ...)
    if batch == 1:  # index_select along dim 0 copies whole rows at a time: several times faster
        picked = rows_of[0].index_select(0, units.reshape(-1))[None]
    else:
        picked = rows_of.index_select(1, units.reshape(-1))  # (B, heads * c * S, ...)
    return picked.view(batch, heads, *units.shape[1:], *table.shape[3:])


def _chunk_blocks(batch: int, heads: int, keys: int, head_dim: int, itemsize: int) -> int:
    """Query blocks per chunk so that a chunk's gathered keys take about GATHER_CHUNK_BYTES."""
    return max(1, GATHER_CHUNK_BYTES // (batch * heads * keys * head_dim * itemsize))


def gather_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: BlockPattern,
    key_valid: torch.Tensor | None = None,
    extra_k: torch.Tensor | None = None,
    extra_v: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """The gathered-blocks path: exact, differentiable, no ``(L, L)`` tensor.

    Global queries run dense attention over the sequence. Every non-global query block sees
    the global units, then its pattern's units, of the key table ``[global keys padded to a
    unit | non-global keys | extra keys]``. One ``index_select`` gathers the
    keys of many blocks at a time, another their values, and a third their validity flags.
    Attention (:func:`_attend`) then runs on ``(B*H, c, bq, D)`` queries against
    ``(B*H, c, K, D)`` keys, ``c`` blocks per chunk, with empty slots and padding masked.
    """
    batch, heads, length, head_dim = q.shape
    g, bq, u = pattern.num_global, pattern.query_block, pattern.unit
    if key_valid is None:
        key_valid = torch.ones(1, 1, pattern.num_keys, dtype=torch.bool, device=q.device)
    outputs = []
    if g:  # global queries see the whole sequence
        outputs.append(_attend(q[:, :, :g], k, v, key_valid[:, :, None, :length], dropout_p))
    if pattern.num_blocks == 0:
        return torch.cat(outputs, dim=2)

    global_units = -(-g // u)
    global_pad = global_units * u - g
    table_k = _key_table(k, extra_k, g, global_pad, u)  # (B, H, Tg + T, u, D)
    table_v = _key_table(v, extra_v, g, global_pad, u)
    table_valid = F.pad(
        _key_table(key_valid, None, g, global_pad, u), (0, 0, 0, 1)
    )  # (Bm, Hm, Tg + T + 1, u)
    units = pattern.key_units
    global_slots = torch.arange(global_units, device=units.device).expand(units.shape[0], units.shape[1], -1)
    # (Hp, nb, Tg + S): the global units, then the pattern's. An empty slot reads any unit of
    # keys (unit 0), and the unit of validity flags appended above, which is all False.
    slots = torch.cat([global_slots, global_units + units.clamp(min=0)], dim=-1)
    valid_slots = torch.cat([global_slots, global_units + units.where(units >= 0, pattern.num_units)], dim=-1)
    q_blocks = q[:, :, g:].unflatten(2, (pattern.num_blocks, bq))  # (B, H, nb, bq, D)

    step = _chunk_blocks(batch, heads, slots.shape[-1] * u, head_dim, k.element_size())
    starts = range(0, pattern.num_blocks, step)
    # With autograd, gather every block at once and split: each backward op (one index_add,
    # one cat) then touches the whole table once, where per-chunk gathers would each add a
    # table-sized gradient. The gathered keys are kept for the backward pass either way.
    # Without autograd, gather a chunk at a time, so the keys never exist in full.
    if table_k.requires_grad or table_v.requires_grad:
        key_chunks = _gather_units(table_k, slots).split(step, dim=2)  # (B, H, c, Tg + S, u, D) each
        value_chunks = _gather_units(table_v, slots).split(step, dim=2)
    else:
        key_chunks = (_gather_units(table_k, slots[:, s : s + step]) for s in starts)
        value_chunks = (_gather_units(table_v, slots[:, s : s + step]) for s in starts)
    for start, q_chunk, keys, values in zip(
        starts, q_blocks.split(step, dim=2), key_chunks, value_chunks, strict=True
    ):
        chunk = valid_slots[:, start : start + step]  # (Hp, c, Tg + S)
        c = chunk.shape[1]
        mask = _gather_units(table_valid, chunk).flatten(3, 4)[:, :, :, None]  # (Bm, Hv, c, 1, K)
        if pattern.band is not None:
            mask = mask & _band_mask(pattern, chunk, start, global_units)  # (Bm, Hv, c, bq, K)
        out = _attend(
            q_chunk.flatten(0, 1),  # (B*H, c, bq, D)
            keys.flatten(3, 4).flatten(0, 1),  # (B*H, c, K, D)
            values.flatten(3, 4).flatten(0, 1),
            mask.expand(batch, heads, -1, -1, -1).flatten(0, 1),
            dropout_p,
        )
        outputs.append(out.view(batch, heads, c * bq, head_dim))
    return torch.cat(outputs, dim=2)


FUSED_DTYPES = (torch.float32, torch.float64)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, dropout_p: float
) -> torch.Tensor:
    """Softmax attention of ``(..., Lq, D)`` queries over ``(..., K, D)`` keys under a bool mask.

    Single and double precision use the fused ``scaled_dot_product_attention``. Its CPU kernel
    computes in fp32 even for bf16 inputs, so bf16 and fp16 take another route that runs ~2-3x
    faster on bf16-capable CPUs. A ``baddbmm`` adds the mask as a bias while it computes the
    scores, then a softmax and a ``bmm`` follow. The bias is the dtype's lowest finite value,
    not -inf, so a query with no visible key gets a finite average over masked keys instead of
    NaN. Only padding can be in that situation, and its outputs never reach real tokens.

    Args:
        q: ``(..., Lq, D)``; k, v: ``(..., K, D)`` with the same leading dims.
        mask: bool, broadcastable to ``(..., Lq, K)``; True = visible.
        dropout_p: dropout on the attention probabilities.
    """
    if q.dtype in FUSED_DTYPES:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    lead, rows, head_dim = q.shape[:-2], q.shape[-2], q.shape[-1]
    bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
        ~mask, torch.finfo(q.dtype).min
    )
    bias = bias.expand(*lead, -1, -1).reshape(-1, *bias.shape[-2:])  # (N, 1 or Lq, K)
    scores = torch.baddbmm(
        bias,
        q.reshape(-1, rows, head_dim),
        k.reshape(-1, *k.shape[-2:]).transpose(1, 2),
        alpha=head_dim**-0.5,
    )  # (N, Lq, K)
    probs = F.dropout(scores.softmax(dim=-1), dropout_p)
    return torch.bmm(probs, v.reshape(-1, *v.shape[-2:])).view(*lead, rows, v.shape[-1])


def _key_table(
    x: torch.Tensor, extra: torch.Tensor | None, num_global: int, global_pad: int, unit: int
) -> torch.Tensor:
    """``[global | pad | non-global | extra]`` along dim 2, cut into units of ``unit``.

    Works for keys and values ``(B, H, L, D)`` (padding with zeros) and for validity flags
    ``(B, H, L + E)`` (padding with False, the extra part already included). The table is
    contiguous, so that :func:`_gather_units` can address its units as rows without copying it
    at every chunk: a view of ``x`` when ``x`` is contiguous and there is no padding or extra
    key, one copy otherwise (the encoder's ``k`` and ``v`` are strided views of its QKV output).
    """
    pieces = [x]
    if global_pad:
        blank = x.new_zeros(*x.shape[:2], global_pad, *x.shape[3:])
        pieces = [x[:, :, :num_global], blank, x[:, :, num_global:]]
    if extra is not None:
        pieces.append(extra)
    table = pieces[0].contiguous() if len(pieces) == 1 else torch.cat(pieces, dim=2)
    return table.unflatten(2, (-1, unit))


def _band_mask(pattern: BlockPattern, slots: torch.Tensor, start: int, global_units: int) -> torch.Tensor:
    """``(1, Hp, c, bq, K)`` bool: the band condition for a chunk of query blocks.

    ``slots`` are the chunk's table units ``(Hp, c, Tg + S)``; the band binds non-global keys only.
    """
    bq, u = pattern.query_block, pattern.unit
    hp, c, num_slots = slots.shape
    device = slots.device
    q_pos = (start * bq + torch.arange(c * bq, device=device)).view(1, c, bq, 1)  # non-global positions
    sequence_unit = slots - global_units  # unit in the non-global sequence, if in [0, N / u)
    k_pos = (sequence_unit[..., None] * u + torch.arange(u, device=device)).view(hp, c, 1, num_slots * u)
    in_sequence = (sequence_unit >= 0) & (sequence_unit < (pattern.seq_len - pattern.num_global) // u)
    in_sequence = in_sequence.repeat_interleave(u, dim=-1)[:, :, None, :]  # (Hp, c, 1, K)
    return (~in_sequence | ((q_pos - k_pos).abs() <= pattern.band))[None]


# --------------------------------------------------------------------------- flex_attention


@lru_cache(maxsize=1)
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


_compiled_shapes: set[tuple] = set()
_block_masks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # BlockPattern -> BlockMask


def flex_block_mask(pattern: BlockPattern, block: int = FLEX_BLOCK_SIZE):
    """The ``BlockMask`` of ``pattern`` on its device: tiles of ``block`` x ``block`` tokens.

    The pattern is constant on cells of ``r = gcd(G, bq, u, block)`` x ``r`` tokens, apart from
    the band, so it is evaluated once per cell, never per token pair. A band is handled from
    each cell's nearest and farthest pair. Tiles whose every pair is visible become *full*
    (no ``mask_mod`` call); tiles with some visible pairs become *partial*.
    """
    from torch.nn.attention.flex_attention import BlockMask

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
    """``(pad, BlockMask)``: flex runs ``pattern`` with ``pad`` masked tokens after the globals.

    The padding aligns the non-global tokens to the cells of :func:`flex_block_mask`: LSG's and
    Longformer's single global token would otherwise make every cell one token wide.
    """
    if pattern not in _block_masks:
        pad = -pattern.num_global % math.gcd(pattern.query_block, pattern.unit, FLEX_BLOCK_SIZE)
        _block_masks[pattern] = pad, flex_block_mask(pattern.with_global_padding(pad))
    return _block_masks[pattern]


def _insert(x: torch.Tensor, at: int, count: int, value) -> torch.Tensor:
    """``x`` with ``count`` entries of ``value`` inserted at position ``at`` of dim 2."""
    filler = torch.full((*x.shape[:2], count, *x.shape[3:]), value, dtype=x.dtype, device=x.device)
    return torch.cat([x[:, :, :at], filler, x[:, :, at:]], dim=2)


def flex_attention_path(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: BlockPattern,
    key_valid: torch.Tensor | None = None,
    extra_k: torch.Tensor | None = None,
    extra_v: torch.Tensor | None = None,
) -> torch.Tensor:
    """Compiled ``flex_attention`` over the pattern's ``BlockMask``; padding via a ``score_mod``.

    Queries and keys are padded at the end to whole tiles of :data:`FLEX_BLOCK_SIZE` (the extra
    keys masked, the extra rows dropped): torch 2.13's CPU kernel applies ``score_mod`` and
    ``mask_mod`` to a last, partial key tile with the stride of a whole tile, so their results
    land on the wrong scores and the output depends on stale buffer contents (wrong values or
    NaN that change from call to call with the same inputs).

    The first call for each new shape compiles. It logs a warning and then the compile time.
    """
    g, length = pattern.num_global, q.shape[2]
    pad, block_mask = _flex_layout(pattern)
    keys, values = _with_extra(k, extra_k), _with_extra(v, extra_v)
    tail = -(keys.shape[2] + pad) % FLEX_BLOCK_SIZE
    if pad or tail:
        if key_valid is None:
            key_valid = torch.ones(q.shape[0], 1, keys.shape[2], dtype=torch.bool, device=q.device)
        q, keys, values = (_insert(x, g, pad, 0.0) for x in (q, keys, values))
        key_valid = F.pad(_insert(key_valid, g, pad, False), (0, tail), value=False)
        keys, values = (F.pad(x, (0, 0, 0, tail)) for x in (keys, values))
        q = F.pad(q, (0, 0, 0, -q.shape[2] % FLEX_BLOCK_SIZE))
    score_mod = None
    if key_valid is not None:
        shared = key_valid.shape[1] == 1

        def score_mod(score, b, h, q_idx, kv_idx):
            visible = key_valid[b, 0 if shared else h, kv_idx]
            return torch.where(visible, score, float("-inf"))

    shape_key = (tuple(q.shape), tuple(keys.shape), q.dtype, q.device.type, key_valid is None)
    first = shape_key not in _compiled_shapes
    if first:
        logger.warning(
            "flex_attention: compiling for q %s, keys %s, %s on %s; the first call takes "
            "~20-30 s on CPU (seconds on GPU), and every new shape compiles again",
            tuple(q.shape),
            tuple(keys.shape),
            q.dtype,
            q.device.type,
        )
        started = time.perf_counter()
    out = _compiled_flex()(q, keys, values, score_mod=score_mod, block_mask=block_mask)
    if first:
        _compiled_shapes.add(shape_key)
        logger.warning("flex_attention: first call for this shape took %.1f s", time.perf_counter() - started)
    return torch.cat([out[:, :, :g], out[:, :, g + pad : pad + length]], dim=2)
