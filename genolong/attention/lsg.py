"""LSG attention (Condevaux & Harispe 2023, "LSG Attention: Extrapolation of pretrained
Transformers to long sequences", Sec. 3): local blocks + sparse tokens + global tokens.

With ``bt = block_size``, ``f = sparsity_factor``, ``c = bt / f`` and ``sbs = sparse_block_size``,
the non-global sequence is cut into blocks of ``bt`` tokens. Query block ``k`` attends, in one
softmax (Sec. 5), to:

* **local** (Sec. 3.1): blocks ``k-1``, ``k`` and ``k+1``;
* **sparse** (Sec. 3.2): every block is compressed into ``c`` sparse tokens; block ``k`` sees the
  ``sbs`` compressed tokens just left of its local window and the ``sbs`` just right of it (with
  ``sbs = bt``, blocks ``k-1-f .. k-2`` and ``k+2 .. k+1+f``, as the authors' ``reshape_to_sparse_block``),
  so local and sparse keys never overlap; a sparse token stands for ``f`` tokens, so the span is
  ``3 bt + 2 sbs f`` tokens;
* **global** (Sec. 3.3): the ``num_global_tokens`` tokens the encoder prepends, which attend to and
  are attended by everything.

Sparse tokens are built per head and block from the keys and values (``sparsity_type``, Sec. 3.2):

* ``pooling``: average pooling with window and stride ``f`` over real tokens; masked when all padding.
* ``stride`` (head-wise strided): head ``h`` keeps positions ``j f + (h mod f)``.
* ``block_stride``: in every block, head ``h`` keeps ``c`` consecutive tokens from offset
  ``(h c) mod bt``, wrapping around the block.
* ``norm`` (max norm): the ``c`` keys of largest norm in each block and head; not differentiated,
  padding never picked before a real token (the authors select within chunks of ``min(bt, sbs)``
  tokens: the same when ``sbs >= bt``, the default).
* ``lsh``: one LSH round per block, ``h(x) = argmax([x R; -x R])`` on L2-normalised keys with ``R``
  ``(D, c/2)`` per head, gives ``c`` buckets whose keys and values are averaged (an empty one masked).
  ``R`` is a seeded draw per layer, so inference is deterministic (the authors' code redraws it at
  every call and adds a pre-merging round; this follows the paper).
* ``none``: local and global attention only.

The authors' later ``bos_pooling`` is not implemented. Defaults are those of the authors'
``LSG*Config``: ``bt = sbs = 128``, ``f = 2``, ``norm``, 1 global token (the paper's classification
runs use ``f = 4``). ALiBi: global tokens have no position; a sparse token stands at the mean position
of the ``f`` tokens it compresses, ``e f + (f - 1) / 2``, whatever the ``sparsity_type`` (exact for
``pooling`` without padding, less than ``bt`` off otherwise). With at most two blocks every sparse
token is out of range and the result is full attention, the paper code's fallback.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F

from genolong.attention import register_attention
from genolong.attention.base import long_length, require_int
from genolong.attention.blocksparse import RANDOM_DEFAULTS, SHARED_DEFAULTS, BlockSparseAttention
from genolong.attention.pattern import BlockPattern
from genolong.core.errors import ConfigError

logger = logging.getLogger("genolong.attention")

SPARSITY_TYPES = ("none", "pooling", "stride", "block_stride", "norm", "lsh")


def _in_blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """``(B, H, N, ...)`` -> ``(B, H, N / block, block, ...)``."""
    return x.unflatten(2, (-1, block))


def select_in_blocks(k: torch.Tensor, v: torch.Tensor, real: torch.Tensor | None, offsets: torch.Tensor,
                     block: int):
    """Keep, inside every block of ``bt = block`` tokens, the tokens at ``offsets``
    ``(B or 1, H or 1, nb or 1, c)`` int64 (stride, block stride, max norm): ``(B, H, N, D)`` keys and
    values and ``(B, N)`` bool or None -> ``(B, H, nb * c, D)`` keys and values, ``(B, H, nb * c)``
    validity (or None)."""
    batch, heads, length, dim = k.shape
    index = offsets.expand(batch, heads, length // block, -1)  # (B, H, nb, c)
    take = index[..., None].expand(-1, -1, -1, -1, dim)

    def pick(x):
        return torch.gather(_in_blocks(x, block), 3, take).flatten(2, 3)

    valid = None
    if real is not None:
        blocks = _in_blocks(real[:, None].expand(-1, heads, -1), block)  # (B, H, nb, bt)
        valid = torch.gather(blocks, 3, index).flatten(2, 3)
    return pick(k), pick(v), valid


def pool(k: torch.Tensor, v: torch.Tensor, real: torch.Tensor | None, factor: int):
    """Average pooling of every ``factor`` consecutive tokens, real tokens only: ``(B, H, N / f, D)`` keys
    and values, and ``(B, 1, N / f)`` validity (or None)."""
    if real is None:
        return _in_blocks(k, factor).mean(3), _in_blocks(v, factor).mean(3), None
    weight = _in_blocks(real[:, None, :, None].to(k.dtype), factor)  # (B, 1, N/f, f, 1)
    count = weight.sum(3)  # (B, 1, N/f, 1)
    scale = 1 / count.clamp(min=1)

    def average(x):
        return (_in_blocks(x, factor) * weight).sum(3) * scale

    return average(k), average(v), count[..., 0] > 0


def lsh_average(k: torch.Tensor, v: torch.Tensor, real: torch.Tensor | None, projections: torch.Tensor,
                block: int):
    """One round of LSH clustering per block of ``block`` tokens, the keys and values of each bucket averaged:
    ``(B, H, N, D)`` keys and values, ``(B, N)`` bool or None, ``(H, D, c/2)`` random rotations ``R`` ->
    ``(B, H, nb * c, D)`` keys and values, ``(B, H, nb * c)`` validity (empty bucket = False)."""
    buckets = 2 * projections.shape[-1]
    with torch.no_grad():
        rotated = torch.einsum("bhnd,hdr->bhnr", F.normalize(k, dim=-1), projections.to(k.dtype))
        bucket = torch.cat([rotated, -rotated], dim=-1).argmax(-1)  # (B, H, N)
        member = F.one_hot(bucket, buckets).to(k.dtype)  # (B, H, N, c)
        if real is not None:
            member = member * real[:, None, :, None]
        member = _in_blocks(member, block)  # (B, H, nb, bt, c)
        count = member.sum(3)  # (B, H, nb, c)
        weight = member / count.clamp(min=1)[:, :, :, None]

    def average(x):
        return torch.einsum("bhntc,bhntd->bhncd", weight, _in_blocks(x, block)).flatten(2, 3)

    return average(k), average(v), (count > 0).flatten(2, 3)


@register_attention("lsg")
class LSGAttention(BlockSparseAttention):
    """LSG: local blocks + sparse tokens + global tokens (Sec. 3). q, k, v ``(B, H, L, D)``; padding_mask
    ``(B, L)``; output ``(B, H, L, D)``; the first ``num_global_tokens`` tokens global,
    ``L - num_global_tokens`` a multiple of ``block_size``."""

    config_defaults: dict[str, Any] = {
        **SHARED_DEFAULTS,
        **RANDOM_DEFAULTS,
        "block_size": 128,
        "sparse_block_size": 128,
        "sparsity_factor": 2,
        "sparsity_type": "norm",
        "num_global_tokens": 1,
    }
    long_block_default = 128

    @classmethod
    def long_settings(cls, trained, max_length, block_size, global_tokens):
        """Blocks (local and sparse) of at most half the trained positions (default 128), ``global_tokens``
        global tokens (§3.3-3.4)."""
        block = cls.long_block(trained, block_size)
        return {"max_position_embeddings": long_length("lsg", trained, max_length, block, "block size"),
                "block_size": block, "sparse_block_size": block, "num_global_tokens": global_tokens}

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.block_size = int(config.block_size)
        self.sparsity_type = config.sparsity_type
        self.factor = int(config.sparsity_factor)
        self.compressed = self.block_size // self.factor  # c: sparse tokens per block
        self.sparse_block_size = int(config.sparse_block_size)
        self.num_global_tokens = int(config.num_global_tokens)
        if self.sparsity_type == "lsh":
            shape = (self.num_heads, int(config.hidden_size) // self.num_heads, self.compressed // 2)
            self.register_draws("lsh_projections", "normal", shape, config)
        strided = self.sparsity_type in ("stride", "block_stride")
        if strided and self.factor > self.num_heads and layer_idx == 0:
            logger.warning("lsg: sparsity_factor %d > %d heads: some %s offsets are used by no head",
                           self.factor, self.num_heads, self.sparsity_type)

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """Raise ConfigError for an impossible LSG setting."""
        super().validate_config(config)
        block = require_int(config, "block_size", 1, "lsg")
        require_int(config, "num_global_tokens", 0, "lsg")
        kind = config.sparsity_type
        if kind not in SPARSITY_TYPES:
            raise ConfigError(f"lsg: unknown sparsity_type {kind!r}; "
                              f"choose one of: {', '.join(SPARSITY_TYPES)}")
        max_len = config.max_position_embeddings
        if max_len % block:
            raise ConfigError(f"lsg: block_size {block} does not divide max_position_embeddings {max_len}")
        if kind == "none":
            return
        factor = require_int(config, "sparsity_factor", 1, "lsg")
        sparse_block = require_int(config, "sparse_block_size", 1, "lsg")
        require_int(config, "attention_seed", 0, "lsg")
        if block % factor:
            raise ConfigError(f"lsg: sparsity_factor {factor} does not divide block_size {block}")
        compressed = block // factor
        if sparse_block % compressed:
            raise ConfigError(f"lsg: sparse_block_size {sparse_block} is not a multiple of "
                              f"block_size / sparsity_factor = {compressed}")
        if kind == "lsh" and compressed % 2:
            raise ConfigError("lsg: lsh needs an even number of buckets per block "
                              f"(block_size / sparsity_factor), got {compressed}")

    @classmethod
    def num_extra_global_tokens(cls, config: Any) -> int:
        """The ``num_global_tokens`` learned tokens the encoder prepends (Sec. 3.3)."""
        return int(config.num_global_tokens)

    @classmethod
    def length_multiple(cls, config: Any) -> int:
        """The block size."""
        return int(config.block_size)

    def build_pattern(self, seq_len: int, device: torch.device) -> BlockPattern:
        """Local units and, unless ``sparsity_type='none'``, the sparse units of every block: units of
        ``c`` tokens (``bt`` without sparsity), the ``N / c`` of the sequence, then one per block of sparse
        tokens."""
        num_global = min(self.num_global_tokens, seq_len)
        num_blocks = (seq_len - num_global) // self.block_size
        blocks = torch.arange(num_blocks)[:, None]
        if self.sparsity_type == "none":
            local = blocks + torch.arange(-1, 2)
            units = local.where((local >= 0) & (local < num_blocks), -1)
            return BlockPattern(seq_len, num_global, self.block_size, self.block_size, units[None].to(device))
        per_block, reach = self.factor, self.sparse_block_size // self.compressed
        local = blocks * per_block + torch.arange(-per_block, 2 * per_block)  # (nb, 3f) units
        local = local.where((local >= 0) & (local < num_blocks * per_block), -1)
        left, right = blocks + torch.arange(-1 - reach, -1), blocks + torch.arange(2, 2 + reach)
        sparse = torch.cat([left, right], dim=1)
        sparse = torch.where((sparse >= 0) & (sparse < num_blocks), num_blocks * per_block + sparse, -1)
        units = torch.cat([local, sparse], dim=1)[None]  # (1, nb, 3f + 2 sbs/c)
        extra = num_blocks * self.compressed
        return BlockPattern(seq_len, num_global, self.block_size, self.compressed, units.to(device), extra)

    def extra_positions(self, positions: torch.Tensor, num_global: int, num_extra: int) -> torch.Tensor:
        """The mean position of the ``f`` tokens each sparse token compresses (module docstring)."""
        return positions[num_global:].unflatten(0, (-1, self.factor)).mean(-1) if num_extra else positions[:0]

    def sparse_tokens(self, k: torch.Tensor, v: torch.Tensor, real: torch.Tensor | None):
        """The ``c`` sparse tokens of every block and head: ``(B, H, N / f, D)`` keys and values."""
        kind, block, c = self.sparsity_type, self.block_size, self.compressed
        if kind == "none" or k.shape[2] == 0:
            return None
        if kind == "pooling":
            return pool(k, v, real, self.factor)
        if kind == "lsh":
            return lsh_average(k, v, real, self.draws("lsh_projections").to(k.device), block)
        heads = torch.arange(k.shape[1], device=k.device)[None, :, None, None]  # (1, H, 1, 1)
        steps = torch.arange(c, device=k.device)
        if kind == "stride":
            offsets = steps * self.factor + heads % self.factor  # (1, H, 1, c)
        elif kind == "block_stride":
            offsets = (heads * c + steps) % block
        else:  # norm: padding ranks below every real key
            with torch.no_grad():
                norms = _in_blocks(k.norm(dim=-1), block)  # (B, H, nb, bt)
                if real is not None:
                    norms = norms.masked_fill(~_in_blocks(real[:, None], block), -1.0)
                offsets = norms.topk(c, dim=-1).indices  # (B, H, nb, c)
        return select_in_blocks(k, v, real, offsets, block)
