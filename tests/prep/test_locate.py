"""Exact-match locating and window cutting (genolong/prep/locate.py, genolong/dna/kmers.py) against hand cases, brute force and real DNA."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.deepsea import CENTRE, as_array, real_rows, synthetic_genome

from genolong.core.errors import ConfigError
from genolong.datasets.chromatin import LocateStatus, Locations
from genolong.dna.kmers import BLOCK, canonical_kmers, pack_kmers, rolling_kmers
from genolong.dna.sequence import read_fasta, reverse_complement, reverse_complement_rows
from genolong.prep.locate import GenomeIndex, centred_flank

CODES = {base: code for code, base in enumerate("ACGT")}


def codes_of(seq: str) -> np.ndarray:
    return np.array([CODES[base] for base in seq], dtype=np.uint8)


def random_dna(rng, length: int) -> str:
    return "".join(rng.choice(list("ACGT"), length))


def brute_force_hits(genome: dict[str, str], query: str) -> set[tuple[str, int, int]]:
    """Every (chrom, start, strand) where ``query`` occurs exactly, by scanning strings."""
    hits = set()
    for strand, needle in ((1, query), (-1, reverse_complement(query))):
        for name, seq in genome.items():
            start = seq.find(needle)
            while start >= 0:
                hits.add((name, start, strand))
                start = seq.find(needle, start + 1)
    return hits


# -- k-mer packing ------------------------------------------------------------------------------


def test_pack_kmers_hand_cases():
    # 2 bits per base, first base highest: A=0, C=1, G=2, T=3.
    assert pack_kmers(codes_of("A" * 31 + "C")) == 1
    assert pack_kmers(codes_of("C" + "A" * 31)) == 1 << 62
    assert pack_kmers(codes_of("T" * 32)) == 2**64 - 1
    assert pack_kmers(codes_of("ACGT" * 8)) == int("00011011" * 8, 2)


def test_rolling_kmers_equal_packing_every_offset():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 4, size=(3, 100), dtype=np.uint8)
    rolled = rolling_kmers(codes)
    assert rolled.shape == (3, 100 - BLOCK + 1)
    expected = np.array([[pack_kmers(row[i : i + BLOCK]) for i in range(100 - BLOCK + 1)] for row in codes])
    np.testing.assert_array_equal(rolled, expected)


def test_canonical_kmers_pick_the_smaller_strand():
    forward = pack_kmers(codes_of("T" * 32))
    reverse = pack_kmers(codes_of("A" * 32))  # the reverse complement of all-T
    keys, orient = canonical_kmers(np.array([forward, reverse]), np.array([reverse, forward]))
    assert keys.tolist() == [0, 0]
    assert orient.tolist() == [2, 1]  # all-T: its reverse complement is canonical; all-A: itself
    palindrome = pack_kmers(codes_of("ACGT" * 8))  # ACGT...ACGT is its own reverse complement
    assert canonical_kmers(np.array([palindrome]), np.array([palindrome]))[1].tolist() == [3]


def test_reverse_complement_rows_matches_the_string_function():
    rows = ["ACGTNAAC", "GGGTTNCA"]
    result = reverse_complement_rows(as_array(rows))
    assert [row.tobytes().decode() for row in result] == [reverse_complement(row) for row in rows]


# -- locating -----------------------------------------------------------------------------------


def test_real_deepsea_rows_located_in_synthetic_genome_and_windows_equal_originals(real_data):
    """Acceptance: the 100 real 8 kb rows embedded (some reverse-complemented) between random spacers."""
    windows, _ = real_rows(real_data)
    records, expected = synthetic_genome(windows)
    index = GenomeIndex.from_records(records)
    inputs = as_array([window[CENTRE] for window in windows])
    found = index.locate(inputs, batch_rows=37)  # several batches
    assert found.counts()["located"] == len(windows)
    assert {(-1 if s < 0 else 1) for s in found.strand} == {1, -1}  # both strands exercised
    for row, (chrom, start, strand) in expected.items():
        assert (found.chrom[row], found.start[row], found.strand[row]) == (chrom, start, strand)
    cut = index.cut_windows(found, inputs, 8000)
    assert [window.tobytes().decode() for window in cut] == windows
    # The reverse-complemented inputs are found on the other strand, with reverse-complemented windows.
    reverse_found = index.locate(reverse_complement_rows(inputs))
    assert (reverse_found.status == LocateStatus.LOCATED).all()
    np.testing.assert_array_equal(reverse_found.start, found.start)
    np.testing.assert_array_equal(reverse_found.strand, -found.strand)
    np.testing.assert_array_equal(
        index.cut_windows(reverse_found, reverse_complement_rows(inputs), 8000), reverse_complement_rows(cut)
    )


def test_locate_agrees_with_brute_force_on_a_genome_with_planted_repeats():
    rng = np.random.default_rng(7)
    repeat = random_dna(rng, 300)
    pieces = []
    for _ in range(12):  # the repeat on both strands, many times
        pieces += [
            random_dna(rng, int(rng.integers(50, 400))),
            repeat if rng.random() < 0.5 else reverse_complement(repeat),
        ]
    genome = {"chr1": "".join(pieces), "chr2": random_dna(rng, 5000)}
    index = GenomeIndex.from_records(genome.items())
    queries, truth = [], []
    for _ in range(200):
        name = "chr1" if rng.random() < 0.7 else "chr2"
        start = int(rng.integers(0, len(genome[name]) - 120))
        query = genome[name][start : start + 120]
        if rng.random() < 0.3:
            query = reverse_complement(query)
        if rng.random() < 0.2:  # a point mutation: usually no exact hit any more
            position = int(rng.integers(0, 120))
            query = query[:position] + "ACGT"[("ACGT".index(query[position]) + 1) % 4] + query[position + 1 :]
        queries.append(query)
        truth.append(brute_force_hits(genome, query))
    found = index.locate(as_array(queries), probe_windows=2, batch_rows=64)
    assert {LocateStatus(s) for s in found.status} >= {
        LocateStatus.LOCATED,
        LocateStatus.AMBIGUOUS,
        LocateStatus.NOT_FOUND,
    }
    for row, hits in enumerate(truth):
        assert found.hits[row] == len(hits)
        if hits:
            name, start, strand = min(hits, key=lambda hit: (list(genome).index(hit[0]), hit[1]))
            assert (index.names[found.chrom[row]], found.start[row], found.strand[row]) == (
                name,
                start,
                strand,
            )


def test_statuses_for_ambiguous_n_rich_and_repetitive_queries():
    rng = np.random.default_rng(3)
    unique, twice = random_dna(rng, 200), random_dna(rng, 200)
    genome = [
        ("chr1", random_dna(rng, 300) + unique + random_dna(rng, 300) + twice + random_dna(rng, 50)),
        ("chr2", random_dna(rng, 100) + reverse_complement(twice) + random_dna(rng, 100)),
    ]
    index = GenomeIndex.from_records(genome)
    n_rich = "".join(base if i % 40 else "N" for i, base in enumerate(unique))  # no N-free 63-bp window
    queries = as_array([unique, twice, n_rich, random_dna(rng, 200)])
    found = index.locate(queries)
    assert [LocateStatus(s) for s in found.status] == [
        LocateStatus.LOCATED,
        LocateStatus.AMBIGUOUS,
        LocateStatus.TOO_MANY_N,
        LocateStatus.NOT_FOUND,
    ]
    assert found.hits.tolist() == [1, 2, 0, 0]
    assert (found.chrom[1], found.start[1], found.strand[1]) == (0, 300 + 200 + 300, 1)  # lowest position
    assert index.locate(queries[1:2], max_candidates=1).status[0] == LocateStatus.TOO_REPETITIVE
    assert found.counts() == {
        "located": 1,
        "not_found": 1,
        "ambiguous": 1,
        "too_many_n": 1,
        "too_repetitive": 0,
    }


def test_query_with_n_matches_the_same_n_in_the_genome():
    rng = np.random.default_rng(4)
    region = random_dna(rng, 150) + "NNNNN" + random_dna(rng, 150)
    index = GenomeIndex.from_records([("chr1", random_dna(rng, 500) + region + random_dna(rng, 500))])
    found = index.locate(as_array([region, region.replace("N", "A")]))
    assert [LocateStatus(s) for s in found.status] == [LocateStatus.LOCATED, LocateStatus.NOT_FOUND]
    assert found.start[0] == 500


def test_hits_never_span_two_chromosomes():
    rng = np.random.default_rng(5)
    left, right = random_dna(rng, 100), random_dna(rng, 100)
    index = GenomeIndex.from_records(
        [("chr1", random_dna(rng, 60) + left), ("chr2", right + random_dna(rng, 64))]
    )
    found = index.locate(as_array([left + right[:50], left[-50:] + right]))
    assert (found.status == LocateStatus.NOT_FOUND).all()


def test_real_genome_sample_located_where_it_was_cut(real_data):
    """200 windows of C. elegans chrX (its first 150 kbp, real repeats): each found where it came from."""
    chrx = next(read_fasta(real_data / "genomes" / "ce2chrX.fa.gz"))
    index = GenomeIndex.from_records([(chrx.name, chrx.sequence)])
    rng = np.random.default_rng(11)
    starts = rng.integers(0, len(chrx) - 1000, 200)
    minus = rng.random(200) < 0.5
    queries = as_array([chrx.sequence[s : s + 1000] for s in starts])
    queries[minus] = reverse_complement_rows(queries[minus])
    found = index.locate(queries)
    assert (found.hits >= 1).all()
    located = found.status == LocateStatus.LOCATED
    assert located.mean() > 0.9  # 0.91: the chromosome's start is repeat-rich
    np.testing.assert_array_equal(found.start[located], starts[located])
    np.testing.assert_array_equal(found.strand[located] < 0, minus[located])
    for row in np.flatnonzero(~located):  # duplicated 1 kb segments: check the count by brute force
        query = queries[row].tobytes().decode()
        assert found.hits[row] == len(brute_force_hits({chrx.name: chrx.sequence}, query))


# -- windows ------------------------------------------------------------------------------------


def test_windows_are_padded_with_n_beyond_chromosome_ends_on_both_strands():
    rng = np.random.default_rng(6)
    chrom = random_dna(rng, 400)
    index = GenomeIndex.from_records([("chr1", chrom)])
    queries = as_array([chrom[10:110], reverse_complement(chrom[280:380])])
    found = index.locate(queries)
    windows = [row.tobytes().decode() for row in index.cut_windows(found, queries, 300)]
    assert windows[0] == "N" * 90 + chrom[:210]  # starts 90 bp before chr1
    assert windows[1] == reverse_complement(chrom[180:400] + "N" * 80)  # ends 80 bp after chr1
    assert windows[1][100:200] == queries[1].tobytes().decode()


def test_unlocated_rows_keep_their_input_in_the_centre():
    index = GenomeIndex.from_records([("chr1", "ACGT" * 100)])
    queries = as_array(["GATTACA" * 10])
    found = Locations.empty(1)
    assert index.cut_windows(found, queries, 80)[0].tobytes().decode() == "NNNNN" + "GATTACA" * 10 + "NNNNN"


def test_context_must_centre_the_input_exactly():
    assert centred_flank(8000, 1000) == 3500
    with pytest.raises(ConfigError, match="even"):
        centred_flank(8001, 1000)
    with pytest.raises(ConfigError, match="at least"):
        centred_flank(500, 1000)


def test_locations_round_trip_through_records():
    found = Locations.empty(3)
    found.status[1], found.chrom[1], found.start[1], found.strand[1], found.hits[1] = 0, 2, 12345, -1, 1
    again = Locations.from_records(found.to_records())
    for name in ("status", "chrom", "start", "strand", "hits"):
        np.testing.assert_array_equal(getattr(again, name), getattr(found, name))
