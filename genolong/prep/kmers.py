"""DNA as 2-bit packed 32-mers: the arithmetic under the genome index of :mod:`.locate`.

A 32-mer packs into one uint64, two bits per base (A0 C1 G2 T3), first base in the two
highest bits; its *canonical* form is the smaller of the k-mer and its reverse complement,
so that one lookup serves both strands. Arrays of sequences are uint8 ASCII (``b"ACGTN"``).
"""

from __future__ import annotations

import numpy as np

#: k-mer length and genome block size (a 32-mer fills one uint64).
BLOCK = 32
#: ASCII -> 2-bit code (A0 C1 G2 T3); everything else (N) -> 4.
CODE = np.full(256, 4, dtype=np.uint8)
CODE[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4, dtype=np.uint8)
# ASCII complement of the ACGTN alphabet.
_COMPLEMENT = np.arange(256, dtype=np.uint8)
_COMPLEMENT[np.frombuffer(b"ACGTN", np.uint8)] = np.frombuffer(b"TGCAN", np.uint8)
# Orientation flags of a k-mer relative to its canonical form.
_FORWARD, _REVERSE = np.uint8(1), np.uint8(2)  # both set: a reverse-complement palindrome


def reverse_complement_rows(seqs: np.ndarray) -> np.ndarray:
    """Reverse complement of every row.

    Args:
        seqs: ``(..., length)`` uint8 ASCII over ``ACGTN``.

    Returns:
        A new array of the same shape.
    """
    return _COMPLEMENT[seqs[..., ::-1]]


def pack_kmers(codes: np.ndarray) -> np.ndarray:
    """Pack 32-mers of 2-bit codes into uint64, first base in the two highest bits.

    Args:
        codes: ``(..., 32)`` uint8 codes in 0..3.

    Returns:
        ``(...)`` uint64.
    """
    quads = codes.reshape(*codes.shape[:-1], BLOCK // 4, 4)  # (..., 8, 4): four bases per byte
    packed = (quads[..., 0] << 6) | (quads[..., 1] << 4) | (quads[..., 2] << 2) | quads[..., 3]
    return np.ascontiguousarray(packed).view(">u8")[..., 0].astype(np.uint64)


def rolling_kmers(codes: np.ndarray) -> np.ndarray:
    """Every packed 32-mer of a run of bases, built by doubling (2-mers, 4-mers, ... 32-mers).

    Args:
        codes: ``(..., n)`` uint8 codes in 0..3, ``n >= 32``.

    Returns:
        ``(..., n - 31)`` uint64; entry ``i`` equals ``pack_kmers(codes[..., i:i + 32])``.
    """
    packed, width = codes.astype(np.uint64), 1
    while width < BLOCK:
        packed = (packed[..., :-width] << np.uint64(2 * width)) | packed[..., width:]
        width *= 2
    return packed


def canonical_kmers(forward: np.ndarray, reverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical form of packed k-mers given their reverse complements (same shape).

    Returns:
        ``keys``: the smaller of the two, uint64; ``orient``: uint8, 1 when the k-mer is its
        canonical form, 2 when its reverse complement is, 3 for palindromes.
    """
    orient = np.where(forward <= reverse, _FORWARD, 0) | np.where(reverse <= forward, _REVERSE, 0)
    return np.minimum(forward, reverse), orient.astype(np.uint8)


def swap_orientation(orient: np.ndarray) -> np.ndarray:
    """Exchange the forward and reverse flags (palindromes stay both)."""
    return ((orient & _FORWARD) << 1) | ((orient & _REVERSE) >> 1)
