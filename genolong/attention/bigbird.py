"""BigBird block-sparse attention (Zaheer et al. 2020, "Big Bird: Transformers for Longer Sequences").

The pattern (Sec. 2, in the blocked form of App. D), in blocks of ``block_size`` tokens:

* **window**: each query block attends to the ``num_window_blocks`` blocks centred on it (App. D: 3);
* **random**: ``num_random_blocks`` further blocks per query block and head, drawn outside the window
  without repetition (as transformers' ``_bigbird_block_rand_mask``);
* **global**: ``num_global_blocks`` blocks of global tokens, which attend to and are attended by every
  token. Window and random blocks range over the non-global blocks only.

``global_token_location`` (Sec. 2): ``"itc"``, the first blocks of the sequence itself are global (the
first ones so that ``[CLS]`` is global and end padding never is); ``"etc"``, the encoder prepends
``num_global_blocks * block_size`` learned tokens; ``"itc_ends"``, the first *and last* blocks are global,
as in transformers' ``BigBirdModel`` (``num_global_blocks`` must be 2): the last block is moved second
while the pattern runs, then back. Either way the attention sees the global tokens first.

``random_layout="seeded"`` (default): uniform draws ``(heads, max_blocks, num_random_blocks)``, a
per-layer buffer (:mod:`genolong.attention.blocksparse`), decoded by :func:`random_blocks` for any
length. ``"transformers_eval"``: transformers' eval-mode layout, in which every random block is the
*first* block, so each non-global query block sees the first block's keys ``1 + num_random_blocks``
times in its softmax; the copies are appended as extra keys, which reproduces those weights exactly.
``genolong convert`` sets it for transformers BigBird checkpoints.

``full_attention_max_tokens``: inputs of at most this many tokens get full attention, as transformers'
BigBird does below ``(5 + 2 * num_random_blocks) * block_size`` tokens (0: never).

ALiBi positions: every token keeps its place in the input (``itc_ends``' last block too); ETC's
prepended tokens have none; ``transformers_eval``'s copies stand where the tokens they copy stand.

Defaults are those of App. F, Table 21 (computational biology): blocks of 64, a window of 3 blocks,
3 random blocks, 2 global blocks, ITC.
"""

from __future__ import annotations

from typing import Any

import torch

from genolong.attention import register_attention
from genolong.attention.alibi import token_positions
from genolong.attention.base import long_length, require_int
from genolong.attention.blocksparse import RANDOM_DEFAULTS, SHARED_DEFAULTS, BlockSparseAttention
from genolong.attention.full import full_attention
from genolong.attention.pattern import BlockPattern
from genolong.core.errors import ConfigError

GLOBAL_TOKEN_LOCATIONS = ("itc", "itc_ends", "etc")
RANDOM_LAYOUTS = ("seeded", "transformers_eval")


def random_blocks(draws: torch.Tensor, num_blocks: int, radius: int) -> torch.Tensor:
    """Decode ``(H, >= nb, r)`` uniform draws in ``[0, 1)`` into ``(H, nb, r)`` int64 random key blocks
    outside each query block's window (``-1`` where fewer than ``r`` candidates exist).

    Query block ``i``'s candidates are the blocks ``0 .. nb-1`` outside ``[i - radius, i + radius]``. Its
    ``j``-th random block is candidate number ``floor(u_j * (C_i - j))`` among the ``C_i - j`` still free:
    sampling without replacement. Plain arithmetic, so a stored draw gives the same layout on every device
    and torch version.
    """
    heads, _, num_random = draws.shape
    device = draws.device
    offsets = torch.arange(-radius, radius + 1, device=device)
    window = torch.arange(num_blocks, device=device)[:, None] + offsets
    in_range = (window >= 0) & (window < num_blocks)  # (nb, w)
    candidates = num_blocks - in_range.sum(-1)  # (nb,)
    beyond = num_blocks + window.shape[1] + num_random  # larger than any block index
    taken = window.where(in_range, beyond).expand(heads, -1, -1)  # (H, nb, w)
    picks = []
    for j in range(num_random):
        free = (candidates - j).clamp(min=0)  # (nb,)
        rank = (draws[:, :num_blocks, j] * free).floor().long()  # (H, nb), rank among free blocks
        block = torch.minimum(rank, (free - 1).clamp(min=0))
        for excluded in taken.sort(dim=-1).values.unbind(-1):  # rank -> block index, skipping taken
            block = block + (excluded <= block)
        block = torch.where(free > 0, block, -1)
        picks.append(block)
        taken = torch.cat([taken, block.where(block >= 0, beyond)[..., None]], dim=-1)
    if not picks:
        return torch.empty(heads, num_blocks, 0, dtype=torch.long, device=device)
    return torch.stack(picks, dim=-1)


@register_attention("bigbird")
class BigBirdAttention(BlockSparseAttention):
    """BigBird: window + random + global blocks (App. D). q, k, v ``(B, H, L, D)``; padding_mask ``(B, L)``;
    output ``(B, H, L, D)``; ``L - G`` a multiple of ``block_size``, ``G = num_global_blocks * block_size``
    (or ``L`` if shorter: a sequence of at most ``G`` tokens gets full attention)."""

    config_defaults: dict[str, Any] = {
        **SHARED_DEFAULTS,
        **RANDOM_DEFAULTS,
        "block_size": 64,
        "num_window_blocks": 3,
        "num_random_blocks": 3,
        "num_global_blocks": 2,
        "global_token_location": "itc",
        "random_layout": "seeded",
        "full_attention_max_tokens": 0,
    }
    pattern_uses_draws = True

    @classmethod
    def long_settings(cls, trained, max_length, block_size, global_tokens):
        """Blocks of at most half the trained positions (default 64); no global tokens to add."""
        if global_tokens:
            raise ConfigError(f"--global-tokens {global_tokens}: bigbird has its first blocks as global tokens (ITC), "
                              "none to add")
        block = cls.long_block(trained, block_size)
        return {"max_position_embeddings": long_length("bigbird", trained, max_length, block, "block size"),
                "block_size": block}

    def __init__(self, config: Any, layer_idx: int = 0):
        super().__init__(config, layer_idx)
        self.block_size = int(config.block_size)
        self.window_radius = (int(config.num_window_blocks) - 1) // 2
        self.num_random_blocks = int(config.num_random_blocks)
        self.num_global_tokens = int(config.num_global_blocks) * self.block_size
        self.max_blocks = int(config.max_position_embeddings) // self.block_size
        self.last_block_global = config.global_token_location == "itc_ends"
        self.first_block_as_random = config.random_layout == "transformers_eval"
        self.full_attention_max_tokens = int(config.full_attention_max_tokens)
        if self.num_random_blocks and not self.first_block_as_random:
            shape = (self.num_heads, self.max_blocks, self.num_random_blocks)
            self.register_draws("random_block_draws", "uniform", shape, config)

    @classmethod
    def validate_config(cls, config: Any) -> None:
        """Raise ConfigError for an impossible BigBird setting."""
        super().validate_config(config)
        name = cls.attention_name
        block = require_int(config, "block_size", 1, name)
        window = require_int(config, "num_window_blocks", 1, name)
        require_int(config, "num_random_blocks", 0, name)
        global_blocks = require_int(config, "num_global_blocks", 0, name)
        require_int(config, "attention_seed", 0, name)
        max_len = config.max_position_embeddings
        if max_len % block:
            raise ConfigError(f"bigbird: block_size {block} does not divide "
                              f"max_position_embeddings {max_len}")
        if window % 2 == 0:
            raise ConfigError(f"bigbird: num_window_blocks must be odd (a symmetric window), got {window}")
        if window * block > max_len:
            raise ConfigError(f"bigbird: the window ({window} blocks of {block} = {window * block} tokens) "
                              f"is larger than the sequence (max_position_embeddings {max_len})")
        require_int(config, "full_attention_max_tokens", 0, name)
        location = config.global_token_location
        if location not in GLOBAL_TOKEN_LOCATIONS:
            raise ConfigError("bigbird: global_token_location must be one of "
                              f"{', '.join(GLOBAL_TOKEN_LOCATIONS)}, got {location!r}")
        if location == "itc_ends" and global_blocks != 2:
            raise ConfigError(f"bigbird: itc_ends makes 2 blocks global (first, last), got num_global_blocks {global_blocks}")
        if config.random_layout not in RANDOM_LAYOUTS:
            raise ConfigError(f"bigbird: random_layout must be one of {', '.join(RANDOM_LAYOUTS)}, "
                              f"got {config.random_layout!r}")
        if location != "etc" and global_blocks * block >= max_len:
            raise ConfigError(f"bigbird: {global_blocks} global blocks of {block} tokens leave no sparse "
                              f"part in max_position_embeddings {max_len}")

    @classmethod
    def num_extra_global_tokens(cls, config: Any) -> int:
        """ETC: ``num_global_blocks * block_size`` prepended tokens; ITC: 0."""
        if config.global_token_location == "etc":
            return int(config.num_global_blocks) * int(config.block_size)
        return 0

    @classmethod
    def length_multiple(cls, config: Any) -> int:
        """The block size."""
        return int(config.block_size)

    def build_pattern(self, seq_len: int, device: torch.device) -> BlockPattern:
        """Window and random blocks of every non-global query block."""
        num_global = min(self.num_global_tokens, seq_len)
        num_blocks = (seq_len - num_global) // self.block_size
        if num_blocks > self.max_blocks:
            raise ValueError(f"bigbird: {seq_len} tokens exceed max_position_embeddings ({self.max_blocks} "
                             f"blocks of {self.block_size} after the global ones)")
        radius = self.window_radius
        window = torch.arange(num_blocks)[:, None] + torch.arange(-radius, radius + 1)  # (nb, w)
        units = window.where((window >= 0) & (window < num_blocks), -1)[None]  # (1, nb, w)
        num_extra = 0
        if self.num_random_blocks and self.first_block_as_random and num_blocks:
            # the extra keys are num_random_blocks copies of the first block: units nb .. nb + r - 1
            copies = torch.arange(num_blocks, num_blocks + self.num_random_blocks).expand(1, num_blocks, -1)
            units = torch.cat([units, copies], dim=-1)
            num_extra = self.num_random_blocks * self.block_size
        elif self.num_random_blocks and not self.first_block_as_random:
            draws = self.draws("random_block_draws").cpu()
            randoms = random_blocks(draws, num_blocks, radius)  # (H, nb, r)
            units = torch.cat([units.expand(self.num_heads, -1, -1), randoms], dim=-1)
        block = self.block_size
        return BlockPattern(seq_len, num_global, block, block, units.to(device), num_extra)

    def extra_keys(self, k: torch.Tensor, v: torch.Tensor, padding_mask: torch.Tensor | None, num_global: int):
        """``transformers_eval``: ``num_random_blocks`` copies of the first block's keys and values,
        ``(B, H, r * block_size, D)`` each, and their validity ``(B, 1, r * block_size)``; else None."""
        if not (self.first_block_as_random and self.num_random_blocks and k.shape[2] > num_global):
            return None
        copies, first = self.num_random_blocks, slice(0, self.block_size)
        valid = None if padding_mask is None else padding_mask[:, None, first].repeat(1, 1, copies)
        return k[:, :, first].repeat(1, 1, copies, 1), v[:, :, first].repeat(1, 1, copies, 1), valid

    def extra_positions(self, positions: torch.Tensor, num_global: int, num_extra: int) -> torch.Tensor:
        """``transformers_eval``: the positions of the first block, once per copy (module docstring)."""
        return positions[: self.block_size].repeat(self.num_random_blocks) if num_extra else positions[:0]

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Full attention up to ``full_attention_max_tokens``; else the sparse pattern, with the last
        block moved next to the first while it runs when both are global (``itc_ends``)."""
        length = q.shape[2]
        positions = token_positions(length, self.num_prepended, q.device)  # (L,)
        if length <= self.full_attention_max_tokens:
            bias = self.alibi_bias(positions, positions, q.dtype)
            return full_attention(q, k, v, padding_mask, self.dropout if self.training else 0.0, bias)
        if not self.last_block_global or length <= self.num_global_tokens:
            return super().forward(q, k, v, padding_mask)
        order = _ends_first(length, self.block_size, q.device)  # (L,)
        q, k, v = (x.index_select(2, order) for x in (q, k, v))
        padding_mask = None if padding_mask is None else padding_mask.index_select(1, order)
        out = super().forward(q, k, v, padding_mask, positions.index_select(0, order))
        return out.index_select(2, torch.argsort(order))


def _ends_first(length: int, block: int, device: torch.device) -> torch.Tensor:
    """``(L,)`` token order: the first block, the last block, then the blocks in between."""
    positions = torch.arange(length, device=device)
    return torch.cat([positions[:block], positions[-block:], positions[block:-block]])
