"""CHROM:START-END regions (genolong/dna/regions.py): parsing, cropping records, errors."""

from __future__ import annotations

import pytest

from genolong.core.errors import InputError, UserError
from genolong.dna.regions import Region, iter_regions
from genolong.dna.sequence import write_fasta


def test_parse_whole_chromosomes_ranges_and_open_ends():
    assert Region.parse("chr1") == Region("chr1", 0, None)
    assert Region.parse(" chr1:1,000-2,500 ") == Region("chr1", 1000, 2500)
    assert Region.parse("chrX:-500") == Region("chrX", 0, 500)
    assert Region.parse("17:100-") == Region("17", 100, None)
    for bad in ("chr1:5-5", "chr1:9-3", "chr1:a-b", "chr1 chr2", ""):
        with pytest.raises(UserError, match="bad region"):
            Region.parse(bad)


def test_records_are_cropped_by_alias_and_named_by_their_interval(tmp_path):
    fasta = tmp_path / "g.fa"
    write_fasta(fasta, [("chr1", "ACGTACGTAC"), ("chr2", "GGGGCCCC")])
    assert [(r.name, r.sequence) for r in iter_regions(fasta)] == [("chr1", "ACGTACGTAC"), ("chr2", "GGGGCCCC")]
    cropped = iter_regions(fasta, [Region("1", 2, 6), Region("chr2", 4)])
    assert [(r.name, r.sequence) for r in cropped] == [("chr1:2-6", "GTAC"), ("chr2:4-8", "CCCC")]


def test_regions_past_the_end_or_on_missing_records_are_errors(tmp_path):
    fasta = tmp_path / "g.fa"
    write_fasta(fasta, [("chr1", "ACGTACGTAC")])
    with pytest.raises(InputError, match="extends past the record's end"):
        list(iter_regions(fasta, [Region("chr1", 5, 11)]))
    with pytest.raises(UserError, match="no record named chr9"):
        list(iter_regions(fasta, [Region("chr9")]))
