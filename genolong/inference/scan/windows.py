"""A batch of bins -> model inputs: windows read by random access, N-rich ones skipped, tokenised.

Tokenisation is exactly the classifier's (:class:`~genolong.classifier.directory.TokenEncoder`), so a bin
scores what ``predict-promoter`` scores on its window; with a per-base tokenizer, windows without N are
encoded by a numpy table lookup instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view

from genolong.classifier.directory import TokenEncoder
from genolong.core.errors import UserError
from genolong.dna.genome import Genome
from genolong.dna.sequence import reverse_complement_rows
from genolong.inference.scan.plan import ScanPlan

_N = ord("N")


def is_per_base(tokenizer) -> bool:
    """True when every non-special token is one of ``ACGTN`` or a run of N."""
    special = set(tokenizer.all_special_tokens)
    return all(token in special or len(token) == 1 and token in "ACGTN" or set(token) == {"N"}
               for token in tokenizer.get_vocab())


class WindowEncoder:
    """Windows as bases -> ``[CLS] tokens [SEP]`` rows of ``max_len`` tokens, as :class:`TokenEncoder`'s."""

    def __init__(self, tokenizer, max_len: int):
        self.tokens = TokenEncoder(tokenizer, max_len)
        self.lookup = None
        if is_per_base(tokenizer):
            vocab = tokenizer.get_vocab()
            self.lookup = np.zeros(256, dtype=np.int64)
            for base in "ACGT":
                self.lookup[ord(base)] = vocab[base]

    def __call__(self, bases: np.ndarray) -> dict[str, torch.Tensor]:
        """Encode (B, W) uint8 ASCII windows (``ACGTN``) into ``input_ids``/``attention_mask`` (B, T)."""
        fast = np.zeros(len(bases), dtype=bool) if self.lookup is None else ~(bases == _N).any(axis=1)
        if fast.all():
            columns = self.tokens.central(np.arange(bases.shape[1]))  # the central max_len - 2 bases
            return self.tokens.pad(self.lookup[bases[:, columns]])
        slow = np.flatnonzero(~fast)
        encodings = self.tokens.backend.encode_batch_fast([row.tobytes().decode() for row in bases[slow]],
                                                          add_special_tokens=False)
        bodies: list = [None] * len(bases)
        for row, encoding in zip(slow, encodings, strict=True):
            bodies[row] = self.tokens.central(encoding.ids)
        for row in np.flatnonzero(fast):
            bodies[row] = self.tokens.central(self.lookup[bases[row]])
        return self.tokens.pad(bodies)


def read_windows(genome: Genome, chromosome: str, starts: np.ndarray, window: int) -> np.ndarray:
    """The (B, window) uint8 bases of windows at ``starts`` (non-decreasing), read in runs of
    overlapping windows so that each base is read once."""
    out = np.empty((len(starts), window), dtype=np.uint8)
    breaks = np.flatnonzero(np.diff(starts) > window) + 1
    for run in np.split(np.arange(len(starts)), breaks):
        lo, hi = int(starts[run[0]]), int(starts[run[-1]]) + window
        bases = np.frombuffer(genome.fetch(chromosome, lo, hi).encode("ascii"), dtype=np.uint8)
        out[run] = sliding_window_view(bases, window)[starts[run] - lo]
    return out


class WindowBatches(torch.utils.data.Dataset):
    """The model inputs of the plan's batches ``indices`` (one rank's share), a whole batch per item read and
    tokenised in the DataLoader's workers: ``batch`` (the plan's index; -1: the empty item), ``bp`` (its
    bins' width), ``scored`` (n_bins,) bool (False: over ``max_n_fraction`` N, or a chromosome shorter than
    the window), ``input_ids`` and ``attention_mask`` (S, T) of the S scored windows (with ``rc`` 2S, the
    reverse complements last); or ``{"error": message}``, a user error for the main process to raise
    without a traceback."""

    def __init__(self, plan: ScanPlan, genome_path: Path, encoder: WindowEncoder, indices: list[int], *,
                 rc: bool, max_n_fraction: float):
        self.plan, self.genome_path, self.encoder, self.indices = plan, genome_path, encoder, indices
        self.rc, self.max_n_fraction = rc, max_n_fraction
        self._genome: tuple[int, Genome] | None = None

    def __len__(self) -> int:
        return max(len(self.indices), 1)  # Lightning wants a batch on every rank: an empty one if need be

    @property
    def genome(self) -> Genome:
        """This process's own handle (a file handle shared with a forked parent would race)."""
        if self._genome is None or self._genome[0] != os.getpid():
            self._genome = (os.getpid(), Genome(self.genome_path))
        return self._genome[1]

    def __getitem__(self, item: int) -> dict:
        try:
            return self._item(item)
        except UserError as err:
            return {"error": str(err)}

    def _item(self, item: int) -> dict:
        if not self.indices:
            return {"batch": -1, "bp": 0, "scored": torch.zeros(0, dtype=torch.bool), **_no_rows()}
        batch = self.plan.batch(self.indices[item])
        chromosome = self.plan.chromosomes[batch.chromosome]
        window = self.plan.window
        bin_starts, bin_ends = self.plan.bins(batch.chromosome, batch.lo, batch.hi)
        if chromosome.length < window:
            bases = np.empty((0, window), dtype=np.uint8)
            scored = np.zeros(batch.hi - batch.lo, dtype=bool)
        else:
            starts = self.plan.window_starts(batch.chromosome, bin_starts)
            bases = read_windows(self.genome, chromosome.name, starts, window)
            scored = (bases == _N).sum(axis=1) <= self.max_n_fraction * window
            bases = bases[scored]
        if self.rc:
            bases = np.concatenate([bases, reverse_complement_rows(bases)])
        inputs = self.encoder(bases) if len(bases) else _no_rows()
        return {"batch": batch.index, "bp": int((bin_ends - bin_starts).sum()), "scored": torch.from_numpy(scored),
                **inputs}


def _no_rows() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.zeros((0, 2), dtype=torch.long), "attention_mask": torch.zeros((0, 2), dtype=torch.long)}
