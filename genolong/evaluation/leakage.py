"""Leakage between a benchmark's training and test splits: test sequences the model may have seen.

Each test sequence gets the first kind that applies: ``exact`` (the same sequence, case aside, is in
the training split), ``reverse_complement`` (its reverse complement is), ``near`` (some training
sequence shares a Jaccard index of canonical ACGT k-mers of at least ``cut``, :class:`LeakageSettings`;
never for a sequence shorter than k). What k = 8, cut 0.5 catch, on random 250-bp sequences: the
highest index of one with 200 unrelated ones is about 0.02; a copy with every 20th base changed has
0.43, every 10th 0.12; a copy of which a quarter was replaced by other bases 0.60, a half 0.32."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from genolong.core.errors import ConfigError
from genolong.dna.kmers import canonical_set
from genolong.dna.sequence import reverse_complement

#: The kinds of leakage, in the order a test row is assigned one.
KINDS = ("exact", "reverse_complement", "near")
#: Test rows per sparse product (bounds the memory of the (rows x train) intersection counts).
CHUNK_ROWS = 512


@dataclass(frozen=True)
class LeakageSettings:
    """Near duplicates: canonical ``k``-mer Jaccard index >= ``cut`` (1 <= k <= 15, 0 < cut <= 1)."""

    k: int = 8
    cut: float = 0.5

    def __post_init__(self) -> None:
        if not 1 <= self.k <= 15:
            raise ConfigError(f"leakage.k must be 1..15, got {self.k}")
        if not 0 < self.cut <= 1:
            raise ConfigError(f"leakage.cut must be in (0, 1], got {self.cut}")


@dataclass
class Leakage:
    """Per test row (N,): ``kind`` ('' for none, else one of :data:`KINDS`) and ``max_jaccard``
    (the highest canonical k-mer Jaccard index with any training sequence)."""

    kind: np.ndarray
    max_jaccard: np.ndarray

    @property
    def leaked(self) -> np.ndarray:
        """(N,) bool: the rows of any kind."""
        return self.kind != ""

    def counts(self) -> dict[str, int]:
        """Rows per kind, and ``leaked`` in all."""
        return {kind: int((self.kind == kind).sum()) for kind in KINDS} | {"leaked": int(self.leaked.sum())}


def _incidence(sequences: list[str], k: int) -> sparse.csr_matrix:
    """(N, 4^k) 0/1 matrix: row i marks the canonical k-mers of sequence i."""
    sets = [canonical_set(s, k) for s in sequences]
    indptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])])
    indices = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
    ones = np.ones(len(indices), dtype=np.int32)
    return sparse.csr_matrix((ones, indices, indptr), shape=(len(sequences), 4 ** k))


def max_jaccard(train: list[str], test: list[str], k: int) -> np.ndarray:
    """(N_test,) the highest canonical k-mer Jaccard index of each test sequence with any training
    sequence (0 when they share none), from sparse products of incidence matrices in chunks of test rows."""
    train_matrix = _incidence(train, k).T.tocsc()  # (4^k, N_train)
    train_sizes = np.asarray(train_matrix.sum(axis=0)).ravel()
    best = np.zeros(len(test))
    for start in range(0, len(test), CHUNK_ROWS):
        chunk = _incidence(test[start:start + CHUNK_ROWS], k)
        shared = (chunk @ train_matrix).tocoo()  # (rows, N_train): k-mers in common
        sizes = np.asarray(chunk.sum(axis=1)).ravel()
        union = sizes[shared.row] + train_sizes[shared.col] - shared.data
        jaccard = shared.data / np.maximum(union, 1)
        np.maximum.at(best, start + shared.row, jaccard)
    return best


def copy_kind(sequence: str, seen: set[str]) -> str:
    """``exact`` when ``sequence`` (case aside) is in ``seen`` (upper-case sequences),
    ``reverse_complement`` when its reverse complement is, else ''."""
    sequence = sequence.upper()
    if sequence in seen:
        return "exact"
    return "reverse_complement" if reverse_complement(sequence) in seen else ""


def copy_key(sequence: str) -> str:
    """The key a sequence shares with its copies (:func:`copy_kind`): the smaller of the upper-case
    sequence and its reverse complement."""
    sequence = sequence.upper()
    return min(sequence, reverse_complement(sequence))


def find_leakage(train: list[str], test: list[str], settings: LeakageSettings = LeakageSettings()) -> Leakage:
    """The leakage of each test sequence into the training split (see the module docstring)."""
    seen = {s.upper() for s in train}
    jaccard = max_jaccard(train, test, settings.k)
    kind = [copy_kind(sequence, seen) or ("near" if value >= settings.cut else "")
            for sequence, value in zip(test, jaccard, strict=True)]
    return Leakage(np.array(kind, dtype=object), jaccard)
