"""Negative (non-promoter) examples of the same length as the promoters, by one of four methods:

- ``substitution`` (DeePromoter, Oubounyt et al. 2019; BigBird App. F.2; egochao/DeePromoter
  ``utils.neggen``): of 20 pieces, 8 chosen at random stay in place, 12 become random bases;
- ``shuffle`` (GENA-LM ``promoter_prediction/dataset_generator.py``): those 12 are permuted among
  pieces of their length (the first ``L % 20`` are one base longer), keeping the composition exactly;
- ``genomic``: real windows at least ``min_distance`` bp from every TSS;
- ``fasta``: real non-promoters read from a FASTA file (no code here).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from genolong.core.errors import UserError
from genolong.datasets.promoter import PromoterRecord

from .promoters import Tss, n_fraction, resolve_chrom

NEGATIVE_METHODS = ("substitution", "shuffle", "genomic", "fasta")
#: Negatives made from a positive (they inherit its split and coordinates).
DERIVED_METHODS = ("substitution", "shuffle")
NUM_PIECES = 20
KEPT_PIECES = 8
_BASES = np.frombuffer(b"ACGT", dtype=np.uint8)


def piece_bounds(length: int, num_pieces: int = NUM_PIECES) -> np.ndarray:
    """Boundaries ``(num_pieces + 1,)`` of near-equal pieces, 0 to ``length`` (a UserError if too short)."""
    if length < num_pieces:
        raise UserError(f"a {length}-bp sequence cannot be cut into {num_pieces} pieces to make a negative")
    sizes = np.full(num_pieces, length // num_pieces)
    sizes[: length % num_pieces] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def choose_replaced_pieces(rng: np.random.Generator, num_pieces: int = NUM_PIECES,
                           kept: int = KEPT_PIECES) -> np.ndarray:
    return np.sort(rng.choice(num_pieces, size=num_pieces - kept, replace=False))


def substitution_negative(sequence: str, rng: np.random.Generator) -> str:
    """DeePromoter negative: 8 of 20 pieces kept in place, the other 12 random bases."""
    bounds = piece_bounds(len(sequence))
    out = np.frombuffer(sequence.encode("ascii"), dtype=np.uint8).copy()
    for piece in choose_replaced_pieces(rng):
        lo, hi = bounds[piece], bounds[piece + 1]
        out[lo:hi] = _BASES[rng.integers(0, 4, size=hi - lo)]
    return out.tobytes().decode("ascii")


def shuffle_negative(sequence: str, rng: np.random.Generator) -> str:
    """GENA-LM negative: 8 of 20 pieces kept in place, the other 12 permuted among those of their length."""
    bounds = piece_bounds(len(sequence))
    sizes = np.diff(bounds)
    replaced = choose_replaced_pieces(rng)
    pieces = [sequence[bounds[i] : bounds[i + 1]] for i in range(NUM_PIECES)]
    for size in np.unique(sizes[replaced]):
        slots = replaced[sizes[replaced] == size]
        moved = [pieces[i] for i in slots]
        for slot, source in zip(slots, rng.permutation(len(slots)), strict=True):
            pieces[slot] = moved[source]
    return "".join(pieces)


def derive_negatives(positives: list[PromoterRecord], method: str, rng: np.random.Generator,
                     per_positive: int = 1) -> list[PromoterRecord]:
    """``per_positive`` negatives from each positive, named ``<positive id>|<method><k>``, with its
    coordinates, and its source plus ``|<method>`` when it has one."""
    make = {"substitution": substitution_negative, "shuffle": shuffle_negative}[method]
    return [PromoterRecord(f"{p.id}|{method}{k}", make(p.sequence, rng), 0, p.chrom, p.start, p.end, p.strand,
                           p.source and f"{p.source}|{method}")
            for p in positives for k in range(1, per_positive + 1)]


def add_derived_negatives(splits: dict[str, list[PromoterRecord]], methods: list[str], rng: np.random.Generator,
                          per_positive: int = 1) -> int:
    """Append to each split the negatives of each of ``methods`` made from that split's own promoters,
    dropping those whose sequence already exists in any split; return how many were dropped."""
    seen = {r.sequence for rows in splits.values() for r in rows}
    collisions = 0
    for rows in splits.values():
        positives = [r for r in rows if r.label == 1]
        for method in methods:
            for negative in derive_negatives(positives, method, rng, per_positive):
                if negative.sequence in seen:
                    collisions += 1
                    continue
                seen.add(negative.sequence)
                rows.append(negative)
    return collisions


def allowed_starts(chrom_length: int, tss_positions: list[int], window_length: int,
                   min_distance: int) -> list[tuple[int, int]]:
    """Half-open ranges of starts whose ``window_length`` (``L``) window stays ``min_distance`` (``D``
    >= 1) bp from every 0-based TSS position: ``[s, s + L)`` is ``s - t`` from a TSS ``t < s`` and
    ``t - (s + L - 1)`` from ``t >= s + L``, so each TSS forbids the starts ``t - D - L + 2 .. t + D - 1``."""
    forbidden = sorted((t - min_distance - window_length + 2, t + min_distance) for t in tss_positions)
    ranges, cursor, last_start = [], 0, chrom_length - window_length + 1
    for lo, hi in forbidden:
        if lo > cursor:
            ranges.append((cursor, min(lo, last_start)))
        cursor = max(cursor, hi)
    ranges.append((cursor, last_start))
    return [(lo, hi) for lo, hi in ranges if hi > lo]


def sample_genomic_negatives(genome, sites: list[Tss], window_length: int, count: int, *, min_distance: int,
                             rng: np.random.Generator,
                             max_n_fraction: float = 0.0) -> tuple[list[PromoterRecord], Counter]:
    """Sample ``count`` real windows (:func:`draw_windows`) at least ``min_distance`` bp from every TSS in
    ``sites``, on the chromosomes holding one (so negatives follow the positives into chromosome-held-out
    splits); a UserError when no position is allowed, or too few windows pass."""
    segments = _allowed_segments(genome, sites, window_length, min_distance)
    records, rejected = draw_windows(segments, window_length, count, genome.fetch, rng,
                                     max_n_fraction=max_n_fraction, prefix="genomic|")
    if len(records) < count:
        raise UserError(f"found only {len(records)} of {count} genomic negatives in "
                        f"{max_draws(count)} draws ({dict(rejected)})",
                        hint="lower --min-tss-distance or raise --max-n-fraction")
    return records, rejected


def max_draws(count: int) -> int:
    """How many random windows :func:`draw_windows` may draw to find ``count``: ``20 * count + 1000`` (0 for 0)."""
    return 20 * count + 1000 if count else 0


def draw_windows(segments: list[tuple], length: int, count: int, fetch, rng: np.random.Generator, *,
                 max_n_fraction: float = 0.0, prefix: str = "") -> tuple[list[PromoterRecord], Counter]:
    """Up to ``count`` distinct random ``fetch(name, start, end, strand)`` windows (label 0, named
    ``<prefix><name>:<start><strand>``) in :func:`max_draws` draws, starts uniform over the half-open
    ranges ``(name, lo, hi)`` of ``segments``, strands at even odds; returns them and the counts of the
    redrawn ``repeated_window`` and ``too_many_n`` (more ``N`` than ``max_n_fraction``)."""
    records, rejected, seen = [], Counter(), set()
    cumulative = np.cumsum([hi - lo for _, lo, hi in segments])
    for _ in range(max_draws(count)):
        offset = int(rng.integers(0, cumulative[-1]))
        index = int(np.searchsorted(cumulative, offset, side="right"))
        name, lo, _ = segments[index]
        start = lo + offset - (int(cumulative[index - 1]) if index else 0)
        strand = "+" if rng.random() < 0.5 else "-"
        if (name, start, strand) in seen:
            rejected["repeated_window"] += 1
            continue
        seen.add((name, start, strand))
        sequence = fetch(name, start, start + length, strand)
        if n_fraction(sequence) > max_n_fraction:
            rejected["too_many_n"] += 1
            continue
        records.append(PromoterRecord(f"{prefix}{name}:{start}{strand}", sequence, 0, name, start,
                                      start + length, strand))
        if len(records) == count:
            break
    return records, rejected


def _allowed_segments(genome, sites: list[Tss], window_length: int, min_distance: int) -> list[tuple[str, int, int]]:
    """``(chrom, lo, hi)``: the half-open ranges of window starts far enough from every TSS, on the
    chromosomes that hold a TSS (a UserError if there is none)."""
    tss_by_chrom: dict[str, list[int]] = {}
    for site in sites:
        chrom = resolve_chrom(genome, site.chrom)
        if chrom is not None:
            tss_by_chrom.setdefault(chrom, []).append(site.position)
    segments = [(chrom, lo, hi) for chrom, positions in tss_by_chrom.items() for lo,
                hi in allowed_starts(genome.chromosomes[chrom], positions, window_length, min_distance)]
    if not segments:
        raise UserError(f"no {window_length}-bp window lies {min_distance} bp or more from every TSS",
                        hint="lower --min-tss-distance")
    return segments
