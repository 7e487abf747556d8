"""Negatives: DeePromoter substitution, GENA-LM shuffling, genomic windows far from every TSS."""

from __future__ import annotations

import bisect
from collections import Counter

import numpy as np
import pytest

from genolong.core.errors import UserError
from genolong.dna.genome import Genome
from genolong.dna.sequence import reverse_complement, write_fasta
from genolong.prep.negatives import (
    allowed_starts,
    derive_negatives,
    piece_bounds,
    sample_genomic_negatives,
    shuffle_negative,
    substitution_negative,
)
from genolong.prep.promoters import Tss, read_fasta_records, read_sequence_lines


def pieces(sequence: str) -> list[str]:
    bounds = piece_bounds(len(sequence))
    return [sequence[bounds[i] : bounds[i + 1]] for i in range(20)]


def test_piece_bounds():
    assert np.diff(piece_bounds(300)).tolist() == [15] * 20
    assert np.diff(piece_bounds(251)).tolist() == [13] * 11 + [12] * 9
    assert piece_bounds(8000)[-1] == 8000
    with pytest.raises(UserError, match="cannot be cut into 20 pieces"):
        piece_bounds(19)


@pytest.fixture(scope="module")
def real_promoters(real_data):
    """60 real 300-bp and 60 real 251-bp mouse promoters."""
    lines = read_sequence_lines(real_data / "promoters" / "mm_pos_TATA.txt", 1)[:60]
    fasta = read_fasta_records(real_data / "promoters" / "Mouse_tata.fa", 1)[:60]
    return [r.sequence for r in lines + fasta]


def test_substitution_keeps_exactly_8_of_20_pieces_in_place(real_promoters):
    rng = np.random.default_rng(0)
    for sequence in real_promoters:
        negative = substitution_negative(sequence, rng)
        assert len(negative) == len(sequence) and set(negative) <= set("ACGT")
        same = [a == b for a, b in zip(pieces(sequence), pieces(negative), strict=True)]
        # A replaced 12-15 bp piece equals the original with probability <= 4**-12.
        assert sum(same) == 8


def test_shuffle_keeps_composition_and_8_pieces_in_place(real_promoters):
    rng = np.random.default_rng(0)
    changed = 0
    for sequence in real_promoters:
        negative = shuffle_negative(sequence, rng)
        assert Counter(negative) == Counter(sequence)
        original, moved = pieces(sequence), pieces(negative)
        assert sorted(original) == sorted(moved)  # the same pieces, rearranged
        assert sum(a == b for a, b in zip(original, moved, strict=True)) >= 8
        changed += negative != sequence
    assert changed == len(real_promoters)


def test_shuffle_moves_pieces_only_between_slots_of_equal_length():
    sequence = "".join("ACGT"[i % 4] * (13 if i < 11 else 12) for i in range(20))  # 251 bp
    rng = np.random.default_rng(3)
    for _ in range(20):
        assert [len(p) for p in pieces(shuffle_negative(sequence, rng))] == [13] * 11 + [12] * 9


def test_derived_negatives_are_seeded_and_keep_the_positive_coordinates(real_promoters):
    from genolong.datasets.promoter import PromoterRecord

    positives = [
        PromoterRecord(f"p{i}", s, 1, "chr1", 10 * i, 10 * i + len(s), "+")
        for i, s in enumerate(real_promoters[:5])
    ]
    first = derive_negatives(positives, "substitution", np.random.default_rng(1), per_positive=2)
    again = derive_negatives(positives, "substitution", np.random.default_rng(1), per_positive=2)
    assert first == again
    assert [n.id for n in first[:2]] == ["p0|substitution1", "p0|substitution2"]
    assert all(n.label == 0 and n.chrom == "chr1" for n in first)
    assert (first[2].start, first[2].end) == (positives[1].start, positives[1].end)


# -- genomic negatives ----------------------------------------------------------------------
def distance_to_nearest_tss(start: int, end: int, sorted_tss: list[int]) -> float:
    """Distance in bp from the window ``[start, end)`` to the nearest TSS (0 if one is inside)."""
    i = bisect.bisect_left(sorted_tss, start)
    if i < len(sorted_tss) and sorted_tss[i] < end:
        return 0
    before = start - sorted_tss[i - 1] if i > 0 else float("inf")
    after = sorted_tss[i] - (end - 1) if i < len(sorted_tss) else float("inf")
    return min(before, after)


def test_allowed_starts_by_hand():
    # chromosome 100 bp, one TSS at 50, window 10 bp, at least 5 bp away:
    # start 36 -> window 36..45, 5 bp from 50 (ok); 37 -> 46 is 4 bp away; 55 is 5 bp after 50.
    assert allowed_starts(100, [50], 10, 5) == [(0, 37), (55, 91)]
    assert distance_to_nearest_tss(36, 46, [50]) == 5
    assert distance_to_nearest_tss(37, 47, [50]) == 4
    assert distance_to_nearest_tss(55, 65, [50]) == 5
    assert distance_to_nearest_tss(45, 55, [50]) == 0
    # Overlapping exclusion zones merge; a TSS near the end leaves nothing after it.
    assert allowed_starts(100, [95, 30, 35], 10, 5) == [(0, 17), (40, 82)]
    assert allowed_starts(8, [], 10, 5) == []


@pytest.fixture
def genome_with_tss(tmp_path):
    rng = np.random.default_rng(11)
    chroms = {
        "chrA": "".join(rng.choice(list("ACGT"), size=30_000)),
        "chrB": "".join(rng.choice(list("ACGT"), size=12_000)),
    }
    chroms["chrA"] = chroms["chrA"][:20_000] + "N" * 2_000 + chroms["chrA"][22_000:]
    path = tmp_path / "genome.fa"
    write_fasta(path, list(chroms.items()))
    sites = [Tss("chrA", p, s, f"t{p}") for p, s in [(3000, "+"), (9000, "-"), (15000, "+"), (27000, "-")]]
    sites += [Tss("chrB", 6000, "+", "b")]
    return path, chroms, sites


def test_genomic_negatives_are_at_least_d_from_every_tss(genome_with_tss):
    path, chroms, sites = genome_with_tss
    with Genome(path) as genome:
        records, rejected = sample_genomic_negatives(
            genome, sites, 300, 200, min_distance=1000, rng=np.random.default_rng(5)
        )
    assert len(records) == 200 and len({r.sequence for r in records}) == 200
    for r in records:
        tss_here = [s.position for s in sites if s.chrom == r.chrom]
        nearest = min(min(abs(t - r.start), abs(t - (r.end - 1))) for t in tss_here)
        assert not any(r.start <= t < r.end for t in tss_here) and nearest >= 1000
        assert r.end - r.start == 300 and r.label == 0 and "N" not in r.sequence
        forward = chroms[r.chrom][r.start : r.end]
        assert r.sequence == (forward if r.strand == "+" else reverse_complement(forward))
    assert {r.strand for r in records} == {"+", "-"} and {r.chrom for r in records} == {"chrA", "chrB"}
    assert rejected["too_many_n"] > 0  # the N run on chrA was drawn and redrawn


def test_genomic_negatives_impossible_distance(genome_with_tss):
    path, _, sites = genome_with_tss
    with Genome(path) as genome, pytest.raises(UserError, match="lower --min-tss-distance"):
        sample_genomic_negatives(genome, sites, 300, 10, min_distance=20_000, rng=np.random.default_rng(0))
