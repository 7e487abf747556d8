"""ACGT k-mers as numbers: the one k-mer arithmetic of genolong.

A k-mer of 2-bit base codes (:data:`~genolong.dna.sequence.BASE_CODES`: A0 C1 G2 T3) is the base-4
number ``sum_j code_j * 4^(k - 1 - j)`` (first base most significant): a 32-mer fills one uint64, and the
k-mers of one length number ``0 .. 4^k - 1`` in the order of ``itertools.product("ACGT", repeat=k)``. A
k-mer holding another base (code 4) has no number. Its *canonical* form, the smaller of it and its reverse
complement, serves both strands (the leakage check's k-mer sets, the genome index's 32-mers).
"""

from __future__ import annotations

import numpy as np

from genolong.dna.sequence import BASE_CODES, reverse_complement_rows

#: The longest k-mer a number holds (and the genome index's block size).
BLOCK = 32
# Orientation flags of a k-mer relative to its canonical form.
_FORWARD, _REVERSE = np.uint8(1), np.uint8(2)  # both set: a reverse-complement palindrome


def pack_kmers(codes: np.ndarray) -> np.ndarray:
    """The ``(...)`` uint64 numbers of ``(..., 32)`` uint8 codes in 0..3, packed a byte at a time (less
    memory than :func:`rolling_kmers` on a genome)."""
    quads = codes.reshape(*codes.shape[:-1], BLOCK // 4, 4)  # (..., 8, 4): four bases per byte
    packed = (quads[..., 0] << 6) | (quads[..., 1] << 4) | (quads[..., 2] << 2) | quads[..., 3]
    return np.ascontiguousarray(packed).view(">u8")[..., 0].astype(np.uint64)


def rolling_kmers(codes: np.ndarray, k: int = BLOCK) -> np.ndarray:
    """The number of every k-mer (``k`` 1 to 32) of ``(..., n)`` uint8 codes, ``n >= k``, built by doubling
    (1-mers, 2-mers, 4-mers, ...): ``(..., n - k + 1)`` uint64, entry ``i`` the number of
    ``codes[..., i:i + k]`` (meaningless for a k-mer with a code above 3)."""
    piece, width = codes.astype(np.uint64), 1  # the numbers of the width-mers
    done, out = 0, None  # the numbers of the done-mers
    while width <= k:
        if k & width:
            out = piece if out is None else (
                (out[..., : out.shape[-1] - width] << np.uint64(2 * width)) | piece[..., done:])
            done += width
        piece = (piece[..., :-width] << np.uint64(2 * width)) | piece[..., width:]
        width *= 2
    return out


def acgt_kmers(sequence: str | bytes | np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k-mers of ACGT only of one ASCII sequence (other letters, lowercase included, break k-mers):
    ``starts`` (M,) int64, where each starts, and ``numbers`` (M,) int64 (k <= 31)."""
    data = sequence.encode("ascii") if isinstance(sequence, str) else sequence
    codes = BASE_CODES[np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data]
    n = len(codes) - k + 1
    if n < 1:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    broken = np.concatenate([[0], np.cumsum(codes == 4)])  # bases other than ACGT before each position
    starts = np.flatnonzero(broken[k : k + n] == broken[:n])
    return starts, rolling_kmers(codes, k)[starts].astype(np.int64)


def canonical_set(sequence: str, k: int) -> np.ndarray:
    """The distinct canonical numbers of the ACGT k-mers of ``sequence`` (either case), sorted int64."""
    ascii_bases = np.frombuffer(sequence.upper().encode("ascii"), dtype=np.uint8)
    forward = acgt_kmers(ascii_bases, k)[1]
    reverse = acgt_kmers(reverse_complement_rows(ascii_bases), k)[1][::-1]  # the same k-mers, in the same order
    return np.unique(np.minimum(forward, reverse))


def canonical_kmers(forward: np.ndarray, reverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical form of k-mer numbers given their reverse complements' (same shape): ``keys``, the smaller
    of the two, and ``orient`` uint8, 1 when the k-mer is its canonical form, 2 when its reverse complement
    is, 3 for palindromes."""
    orient = np.where(forward <= reverse, _FORWARD, 0) | np.where(reverse <= forward, _REVERSE, 0)
    return np.minimum(forward, reverse), orient.astype(np.uint8)


def swap_orientation(orient: np.ndarray) -> np.ndarray:
    """Exchange the forward and reverse flags (palindromes stay both)."""
    return ((orient & _FORWARD) << 1) | ((orient & _REVERSE) >> 1)
