"""Three ways to run a :class:`~genolong.attention.pattern.BlockPattern`, and the choice between them.

All three take the same :class:`PatternInputs`, return ``(B, H, L, D)`` and agree to rounding error (tested):

* :func:`dense_attention`: the reference, a masked softmax over the full ``(L, L + E)`` mask; quadratic
  in memory, for tests and short inputs.
* :func:`gather_attention`: portable and differentiable everywhere; the CPU path. Each non-global query
  block attends to the global keys and the key units its pattern names, gathered in chunks of a few MiB
  (so that a chunk's working set stays in cache).
* :func:`~genolong.attention.flex.flex_attention_path`: compiled ``flex_attention``; the GPU path.

:func:`choose_path` turns ``attention_impl`` (``auto`` | ``flex`` | ``gather`` | ``dense``) into one of
them. With ALiBi (:mod:`genolong.attention.alibi`) each path adds ``-m_h |p_i - p_j|`` to the scores it
keeps, the attention class deciding the positions
(:meth:`~genolong.attention.blocksparse.BlockSparseAttention.extra_positions`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from genolong.attention.alibi import alibi_bias, alibi_distance
from genolong.attention.pattern import BlockPattern
from genolong.core.errors import ConfigError

logger = logging.getLogger("genolong.attention")

IMPLEMENTATIONS = ("auto", "flex", "gather", "dense")

#: Bytes of gathered keys per chunk of query blocks in the gather path: a chunk's keys, values and mask
#: stay in the L2/L3 caches (measured against 8 and 16 MiB: docs/results/attention.md).
GATHER_CHUNK_BYTES = 4 << 20

_logged: set[tuple] = set()


@dataclass(frozen=True)
class PatternInputs:
    """What every path attends over: the sequence's queries, keys and values, the pattern, its extra keys
    and values (LSG's sparse tokens, BigBird's copied blocks), which keys are real, and ALiBi's inputs.

    Shapes: q, k, v ``(B, H, L, D)``; extra_k, extra_v ``(B, H, E, D)`` or None; key_valid
    ``(B, Hm, L + E)`` bool with ``Hm`` in ``{1, H}`` (True = a real key), or None (all real);
    slopes ``(H,)`` and positions ``(L + E,)`` (the keys', the first ``L`` also the queries'; -1 =
    positionless), both float in :func:`~genolong.attention.alibi.bias_dtype`, or both None without ALiBi.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    pattern: BlockPattern
    key_valid: torch.Tensor | None = None
    extra_k: torch.Tensor | None = None
    extra_v: torch.Tensor | None = None
    slopes: torch.Tensor | None = None
    positions: torch.Tensor | None = None

    @property
    def keys(self) -> torch.Tensor:
        """``(B, H, L + E, D)``: the sequence's keys, then the extra keys."""
        return self.k if self.extra_k is None else torch.cat([self.k, self.extra_k], dim=2)

    @property
    def values(self) -> torch.Tensor:
        """``(B, H, L + E, D)``: the sequence's values, then the extra values."""
        return self.v if self.extra_v is None else torch.cat([self.v, self.extra_v], dim=2)


def choose_path(
    requested: str, backbone: str, device: torch.device, dtype: torch.dtype, needs_grad: bool,
    dropout_p: float,
) -> str:
    """Resolve ``attention_impl`` into ``flex``, ``gather`` or ``dense``, and log the choice once per
    backbone, path, device and mode.

    ``auto`` picks ``flex`` on CUDA and ``gather`` elsewhere (on CPU it is faster than compiled flex at the
    sizes measured by ``benchmarks/attention_kernels.py``, needs no compile and has a backward pass), and
    ``gather`` when attention dropout (``dropout_p``, 0 at inference) is active: flex has none.
    ``needs_grad``: whether autograd will need a backward pass through this call.

    Raises:
        ConfigError: ``flex`` with a backward pass on CPU, with float64 on CPU, or with attention
            dropout; an unknown name.
    """
    if requested not in IMPLEMENTATIONS:
        raise ConfigError(f"unknown attention_impl {requested!r}; "
                          f"choose one of: {', '.join(IMPLEMENTATIONS)}")
    path = requested
    if requested == "auto":
        path = "flex" if device.type == "cuda" and dropout_p == 0 else "gather"
    if path == "flex" and needs_grad and device.type != "cuda":
        raise ConfigError(f"attention_impl='flex' cannot train on {device.type}: torch's flex_attention "
                          "has no backward pass there; use attention_impl='gather' (or 'auto')")
    if path == "flex" and dtype == torch.float64 and device.type != "cuda":
        raise ConfigError(f"attention_impl='flex' supports float32, bfloat16 and float16 on {device.type}, "
                          "not float64; use attention_impl='gather' (or 'auto')")
    if path == "flex" and dropout_p > 0:
        raise ConfigError("attention_impl='flex' has no attention dropout; set "
                          "attention_probs_dropout_prob=0 or use attention_impl='gather' (or 'auto')")
    key = (backbone, path, device.type, needs_grad)
    if key not in _logged:
        _logged.add(key)
        mode = "training" if needs_grad else "inference"
        logger.info("%s attention: %s path on %s for %s (attention_impl=%r)",
                    backbone, path, device.type, mode, requested)
    return path


def dense_attention(inputs: PatternInputs, dropout_p: float = 0.0) -> torch.Tensor:
    """Masked softmax attention over the pattern's dense ``(L, L + E)`` mask: the reference. A query with no
    visible key (only padding) gets a zero output, as in ``scaled_dot_product_attention``."""
    q = inputs.q
    mask = inputs.pattern.dense_mask()[None]  # (1, Hp, L, L+E)
    if inputs.key_valid is not None:
        mask = mask & inputs.key_valid[:, :, None, :]
    scores = (q @ inputs.keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, L, L+E)
    if inputs.slopes is not None:
        positions = inputs.positions
        scores = scores + alibi_bias(inputs.slopes, positions[: q.shape[2]], positions).to(scores.dtype)
    probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    probs = torch.where(mask.any(dim=-1, keepdim=True), probs, 0.0)
    return F.dropout(probs, dropout_p) @ inputs.values


def _gather_units(table: torch.Tensor, units: torch.Tensor) -> torch.Tensor:
    """Pick units of a table: ``(B, Ht, T+1, ...)`` with ``(Hi, c, S)`` -> ``(B, max(Ht, Hi), c, S, ...)``,
    ``Ht`` and ``Hi`` each 1 (shared by all heads) or the number of heads; one ``index_select``."""
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


def gather_attention(inputs: PatternInputs, dropout_p: float = 0.0) -> torch.Tensor:
    """The gathered-blocks path: exact, differentiable, no ``(L, L)`` tensor.

    Global queries attend densely to the sequence. Every non-global query block sees the global units,
    then its pattern's units, of the key table ``[global keys padded to a unit | non-global keys | extra
    keys]``, gathered (keys, values, validity flags) for ``c`` blocks at a time: :func:`_attend` runs on
    ``(B*H, c, bq, D)`` queries against ``(B*H, c, K, D)`` keys, empty slots and padding masked.
    """
    q, k, v, pattern, key_valid = inputs.q, inputs.k, inputs.v, inputs.pattern, inputs.key_valid
    batch, heads, length, head_dim = q.shape
    g, bq, u = pattern.num_global, pattern.query_block, pattern.unit
    if key_valid is None:
        key_valid = torch.ones(1, 1, pattern.num_keys, dtype=torch.bool, device=q.device)
    outputs = []
    positions = inputs.positions
    if g:  # global queries see the whole sequence
        mask = key_valid[:, :, None, :length]  # (Bm, Hm, 1, L)
        if positions is not None:
            mask = _with_bias(mask, alibi_bias(inputs.slopes, positions[:g], positions[:length]).to(q.dtype))
        outputs.append(_attend(q[:, :, :g], k, v, mask, dropout_p))
    if pattern.num_blocks == 0:
        return torch.cat(outputs, dim=2)

    global_units = -(-g // u)
    global_pad = global_units * u - g
    table_k = _key_table(k, inputs.extra_k, g, global_pad, u)  # (B, H, Tg + T, u, D)
    table_v = _key_table(v, inputs.extra_v, g, global_pad, u)
    # (Bm, Hm, Tg + T + 1, u)
    table_valid = F.pad(_key_table(key_valid, None, g, global_pad, u), (0, 0, 0, 1))
    units = pattern.key_units
    global_slots = torch.arange(global_units, device=units.device).expand(units.shape[0], units.shape[1], -1)
    # (Hp, nb, Tg + S): the global units, then the pattern's. An empty slot reads any unit of
    # keys (unit 0), and the unit of validity flags appended above, which is all False.
    slots = torch.cat([global_slots, global_units + units.clamp(min=0)], dim=-1)
    valid_slots = torch.cat([global_slots, global_units + units.where(units >= 0, pattern.num_units)], dim=-1)
    q_blocks = q[:, :, g:].unflatten(2, (pattern.num_blocks, bq))  # (B, H, nb, bq, D)
    if positions is not None:
        table_positions = F.pad(_key_table(positions[None, None], None, g, global_pad, u), (0, 0, 0, 1))
        q_positions = positions[g:length].view(pattern.num_blocks, bq)  # (nb, bq)

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
        if positions is not None:
            k_positions = _gather_units(table_positions, chunk).flatten(3, 4)[0]  # (Hp, c, K)
            distance = alibi_distance(q_positions[start : start + c, :, None], k_positions[:, :, None, :])
            bias = -inputs.slopes[:, None, None, None] * distance  # (H, c, bq, K)
            mask = _with_bias(mask, bias.to(q.dtype))  # (Bm, H, c, bq, K)
        out = _attend(
            q_chunk.flatten(0, 1),  # (B*H, c, bq, D)
            keys.flatten(3, 4).flatten(0, 1),  # (B*H, c, K, D)
            values.flatten(3, 4).flatten(0, 1),
            mask.expand(batch, heads, -1, -1, -1).flatten(0, 1),
            dropout_p,
        )
        outputs.append(out.reshape(batch, heads, c * bq, head_dim))  # CUDA's SDPA may return it strided
    return torch.cat(outputs, dim=2)


def _with_bias(mask: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A float mask for :func:`_attend`: ``bias`` (H, ..., Q, K) where the bool ``mask``
    (B, H or 1, ..., Q or 1, K) is True, -inf elsewhere."""
    return torch.where(mask, bias[None], float("-inf"))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, dropout_p: float):
    """Softmax attention of ``(..., Lq, D)`` queries over ``(..., K, D)`` keys under ``mask``, broadcastable
    to ``(..., Lq, K)``: bool (True = visible), or float added to the scores (ALiBi; -inf = hidden).

    fp32 and fp64 use the fused ``scaled_dot_product_attention``. Its CPU kernel computes bf16 in fp32, so
    bf16 and fp16 take ``baddbmm`` (the mask as a bias), softmax and ``bmm``, which is faster on bf16-capable
    CPUs. Their bias is the dtype's lowest finite value, not -inf: a query with no visible key (only
    padding) gets a finite average instead of NaN.
    """
    if q.dtype in (torch.float32, torch.float64):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    lead, rows, head_dim = q.shape[:-2], q.shape[-2], q.shape[-1]
    lowest = torch.finfo(q.dtype).min
    if mask.dtype == torch.bool:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, lowest)
    else:
        bias = mask.to(q.dtype).clamp(min=lowest)
    bias = bias.expand(*lead, -1, -1).reshape(-1, *bias.shape[-2:])  # (N, 1 or Lq, K)
    keys = k.reshape(-1, *k.shape[-2:]).transpose(1, 2)
    scores = torch.baddbmm(bias, q.reshape(-1, rows, head_dim), keys, alpha=head_dim**-0.5)  # (N, Lq, K)
    probs = F.dropout(scores.softmax(dim=-1), dropout_p)
    return torch.bmm(probs, v.reshape(-1, *v.shape[-2:])).view(*lead, rows, v.shape[-1])


def _key_table(x: torch.Tensor, extra: torch.Tensor | None, num_global: int, global_pad: int, unit: int):
    """``[global | pad | non-global | extra]`` along dim 2, cut into units of ``unit``, for keys and values
    ``(B, H, L, D)`` (zero padding) and validity flags ``(B, H, L + E)`` (False padding, extra included).

    Contiguous, so that :func:`_gather_units` addresses its units as rows without a copy per chunk: a view
    of a contiguous ``x`` without padding or extra keys, else one copy (the encoder's ``k`` and ``v`` are
    strided views of its QKV output).
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
    """``(1, Hp, c, bq, K)`` bool: the band condition (non-global keys only) for a chunk of query blocks
    whose table units are ``slots`` ``(Hp, c, Tg + S)``."""
    bq, u = pattern.query_block, pattern.unit
    hp, c, num_slots = slots.shape
    device = slots.device
    q_pos = (start * bq + torch.arange(c * bq, device=device)).view(1, c, bq, 1)  # non-global positions
    sequence_unit = slots - global_units  # unit in the non-global sequence, if in [0, N / u)
    k_pos = (sequence_unit[..., None] * u + torch.arange(u, device=device)).view(hp, c, 1, num_slots * u)
    in_sequence = (sequence_unit >= 0) & (sequence_unit < (pattern.seq_len - pattern.num_global) // u)
    in_sequence = in_sequence.repeat_interleave(u, dim=-1)[:, :, None, :]  # (Hp, c, 1, K)
    return (~in_sequence | ((q_pos - k_pos).abs() <= pattern.band))[None]
