"""The one base code table, complement and k-mer numbering (genolong/dna/sequence.py, genolong/dna/kmers.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from genolong.dna.kmers import acgt_kmers, rolling_kmers
from genolong.dna.sequence import BASE_CODES, BASES, reverse_complement, reverse_complement_rows


def number(kmer: str) -> int:
    """The k-mer's rank among the k-mers of its length in ``itertools.product("ACGT")`` order."""
    return ["".join(p) for p in itertools.product(BASES, repeat=len(kmer))].index(kmer)


@pytest.mark.parametrize("k", [1, 3, 5, 6, 7, 12, 31, 32])
def test_rolling_kmers_number_every_k_mer_of_any_length(k):
    codes = np.random.default_rng(k).integers(0, 4, size=(2, 40), dtype=np.uint8)
    rolled = rolling_kmers(codes, k)
    assert rolled.shape == (2, 40 - k + 1) and rolled.dtype == np.uint64
    expected = [[sum(int(c) << 2 * (k - 1 - j) for j, c in enumerate(row[i:i + k])) for i in range(40 - k + 1)]
                for row in codes]
    assert rolled.tolist() == expected


def test_acgt_kmers_skip_every_k_mer_with_another_letter():
    starts, numbers = acgt_kmers("ACGTNacGTA", 3)
    assert starts.tolist() == [0, 1, 7]  # lowercase breaks k-mers as N does
    assert numbers.tolist() == [number("ACG"), number("CGT"), number("GTA")]
    assert [len(part) for part in acgt_kmers("ACG", 4)] == [0, 0]


def test_the_code_table_and_the_complement_of_strings_and_arrays_agree():
    assert [int(BASE_CODES[ord(b)]) for b in "ACGTNacgt-"] == [0, 1, 2, 3, 4, 4, 4, 4, 4, 4]
    rows = ["ACGTNRYacgtn", "KMBDHVswNNAA"]
    arrays = np.frombuffer("".join(rows).encode(), np.uint8).reshape(2, -1)
    assert [row.tobytes().decode() for row in reverse_complement_rows(arrays)] == [reverse_complement(r) for r in rows]
