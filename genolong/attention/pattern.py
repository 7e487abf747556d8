"""Block-sparse attention patterns: who attends to whom, as one small data structure.

Every sparse backbone (BigBird, Longformer, LSG) describes its pattern with a :class:`BlockPattern`;
the execution paths of :mod:`genolong.attention.paths` all read the same object, so they cannot
disagree about the pattern, only about arithmetic. The sequence as the attention sees it::

    position   0 ........ G-1 | G ............................ L-1 | L ........ L+E-1
    token      global tokens  | N = nb * bq non-global tokens       | E extra keys (keys only)

* A global query attends to every key of the sequence (columns ``0 .. L-1``); every query attends
  to all ``G`` global keys.
* Non-global query block ``i`` (``bq`` consecutive tokens) attends to the key *slots*
  ``key_units[h, i, :]``: each names one unit of ``u`` tokens in the key table
  ``[non-global keys (N) | extra keys (E)]`` (table token ``x`` is column ``G + x`` of the dense
  mask), ``-1`` an empty slot. Extra keys are computed from the sequence (LSG's sparse tokens).
* Optionally (Longformer), a ``band``: a non-global query at ``t`` and a non-global key at ``s``
  must also satisfy ``|t - s| <= band``.

The gathered-blocks path reads the slots; :meth:`BlockPattern.mask_mod` is the token-level
predicate, evaluated densely (the reference, ``flex_attention``'s ``BlockMask``) and pointwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import torch


@dataclass(frozen=True, eq=False)
class BlockPattern:
    """A block-sparse attention pattern for one sequence length: ``L = seq_len``, ``G = num_global``,
    ``E = num_extra`` and ``band`` as in the module docstring.

    Attributes:
        query_block: ``bq``; the ``N = L - G`` non-global queries form ``nb = N / bq`` blocks.
        unit: ``u``, the tokens per key slot; divides both ``N`` and ``E``.
        key_units: ``(Hp, nb, S)`` int64 unit indices into the key table, ``-1`` = empty slot;
            ``Hp`` is 1 (every head shares the pattern) or the number of heads.
    """

    seq_len: int
    num_global: int
    query_block: int
    unit: int
    key_units: torch.Tensor
    num_extra: int = 0
    band: int | None = None

    def __post_init__(self):
        n = self.seq_len - self.num_global
        if n < 0 or n % self.query_block:
            raise ValueError(f"{n} non-global tokens do not split into query blocks of {self.query_block} "
                             f"(L={self.seq_len}, G={self.num_global})")
        if (n + self.num_extra) % self.unit:
            raise ValueError(f"key table of {n}+{self.num_extra} tokens does not split into units "
                             f"of {self.unit}")
        if self.key_units.dim() != 3 or self.key_units.shape[1] != n // self.query_block:
            raise ValueError(f"key_units must be (heads, {n // self.query_block}, slots), "
                             f"got {tuple(self.key_units.shape)}")

    @property
    def num_blocks(self) -> int:
        """``nb``, the number of non-global query blocks."""
        return (self.seq_len - self.num_global) // self.query_block

    @property
    def num_units(self) -> int:
        """``T``, the units in the key table (sequence part, then extra keys)."""
        return (self.seq_len - self.num_global + self.num_extra) // self.unit

    @property
    def num_keys(self) -> int:
        """``L + E``, the columns of the dense mask."""
        return self.seq_len + self.num_extra

    @property
    def heads(self) -> int:
        """``Hp``: 1 when every head shares the pattern, else the number of heads."""
        return self.key_units.shape[0]

    @property
    def device(self) -> torch.device:
        return self.key_units.device

    @cached_property
    def unit_table(self) -> torch.Tensor:
        """``(Hp, nb, T)`` bool: query block ``i`` of head ``h`` sees table unit ``t``."""
        hp, nb, slots = self.key_units.shape
        table = torch.zeros(hp, nb, self.num_units + 1, dtype=torch.bool, device=self.device)
        # Empty slots (-1) land in the extra last column, which is dropped.
        table.scatter_(2, self.key_units.where(self.key_units >= 0, self.num_units), True)
        return table[:, :, : self.num_units]

    def mask_mod(self, with_band: bool = True):
        """The pattern as a token-level predicate ``allowed(b, h, q, kv) -> bool tensor``, in tensor
        operations only: the dense mask (broadcast ``arange`` grids) and ``flex_attention``'s ``mask_mod``
        (scalar tensors). ``b`` is ignored, and so is ``h`` when every head shares the pattern; ``q`` in
        ``[0, L)``, ``kv`` in ``[0, L + E)``. ``with_band=False`` leaves the band out."""
        g, length, bq, u = self.num_global, self.seq_len, self.query_block, self.unit
        blocks, units, per_head = self.num_blocks, self.num_units, self.heads > 1
        band = self.band if with_band else None
        table = self.unit_table if blocks else None

        def allowed(b, h, q, kv):
            to_sequence = kv < length
            if table is None:  # all tokens are global: dense attention over the sequence
                return to_sequence & (q >= 0)
            q_global, k_global = q < g, kv < g
            block = torch.clamp((q - g) // bq, 0, blocks - 1)
            unit = torch.clamp((kv - g) // u, 0, units - 1)
            sparse = table[h if per_head else 0, block, unit]
            if band is not None:
                sparse = sparse & (~to_sequence | ((q - kv).abs() <= band))
            return (q_global & to_sequence) | k_global | (~q_global & sparse)

        return allowed

    def dense_mask(self) -> torch.Tensor:
        """``(Hp, L, L + E)`` bool: the whole pattern. Quadratic; for references and tests."""
        sizes = (self.heads, self.seq_len, self.num_keys)
        heads, queries, keys = (torch.arange(n, device=self.device) for n in sizes)
        return self.mask_mod()(None, heads[:, None, None], queries[None, :, None], keys[None, None, :])

    def with_global_padding(self, pad: int) -> BlockPattern:
        """The same pattern with ``pad`` more global tokens (which the caller masks as keys)."""
        return replace(self, seq_len=self.seq_len + pad, num_global=self.num_global + pad)

    def to(self, device: torch.device | str) -> BlockPattern:
        """The same pattern with its index tensor on ``device``."""
        return replace(self, key_units=self.key_units.to(device))
