"""Promoter inputs: TSS BED parsing, windows around a TSS (coordinates and strand), sequence readers."""

from __future__ import annotations

import numpy as np
import pytest

from genolong.core.errors import ConfigError, InputError
from genolong.dna.genome import Genome
from genolong.dna.sequence import reverse_complement, write_fasta
from genolong.prep.promoters import (
    WINDOW_PRESETS,
    Tss,
    TssWindow,
    cut_tss_windows,
    read_fasta_records,
    read_sequence_lines,
    read_tss_bed,
)

COMPLEMENT = str.maketrans("ACGT", "TGCA")


@pytest.fixture
def tiny_genome(tmp_path):
    """chrA: 20,000 random bases with an N run at 18,500..18,600; chrB: 4,000 random bases."""
    rng = np.random.default_rng(7)
    chr_a = "".join(rng.choice(list("ACGT"), size=20_000))
    chr_a = chr_a[:18_500] + "N" * 100 + chr_a[18_600:]
    chr_b = "".join(rng.choice(list("ACGT"), size=4_000))
    path = tmp_path / "tiny.fa"
    write_fasta(path, [("chrA", chr_a), ("chrB", chr_b)])
    return path, {"chrA": chr_a, "chrB": chr_b}


# -- windows ------------------------------------------------------------------------------
def test_window_presets_and_parsing():
    assert WINDOW_PRESETS["deepromoter"] == TssWindow(-249, 51)
    assert WINDOW_PRESETS["deepromoter"].length == 300
    assert WINDOW_PRESETS["bigbird"].length == 8000
    assert TssWindow.parse("bigbird") == TssWindow(-5000, 3000)
    assert TssWindow.parse("-200:51") == TssWindow(-200, 51)
    with pytest.raises(ConfigError, match="START:END"):
        TssWindow.parse("-200..50")
    with pytest.raises(ConfigError, match="contain the TSS"):
        TssWindow(10, 60)


def test_deepromoter_windows_by_hand(tiny_genome):
    path, seqs = tiny_genome
    chr_a = seqs["chrA"]
    sites = [Tss("chrA", 1000, "+", "plus"), Tss("chrA", 1000, "-", "minus")]
    with Genome(path) as genome:
        (plus, minus), skipped = cut_tss_windows(genome, sites, TssWindow(-249, 51))
    assert not skipped
    # Plus strand: offsets -249..+50 are positions 751..1050.
    assert (plus.chrom, plus.start, plus.end, plus.strand) == ("chrA", 751, 1051, "+")
    assert plus.sequence == chr_a[751:1051]
    assert plus.sequence[249] == chr_a[1000]  # the TSS column
    # Minus strand: offset -249 is position 1249 (upstream = higher coordinates), +50 is 950.
    assert (minus.chrom, minus.start, minus.end, minus.strand) == ("chrA", 950, 1250, "-")
    assert minus.sequence == reverse_complement(chr_a[950:1250])
    assert minus.sequence[0] == chr_a[1249].translate(COMPLEMENT)
    assert minus.sequence[249] == chr_a[1000].translate(COMPLEMENT)
    assert minus.sequence[299] == chr_a[950].translate(COMPLEMENT)
    assert plus.label == minus.label == 1


def test_bigbird_long_windows_by_hand(tiny_genome):
    path, seqs = tiny_genome
    chr_a = seqs["chrA"]
    sites = [Tss("chrA", 6000, "+", "p"), Tss("chrA", 12000, "-", "m")]
    with Genome(path) as genome:
        (plus, minus), _ = cut_tss_windows(genome, sites, WINDOW_PRESETS["bigbird"])
    # Plus: offsets -5000..+2999 are positions 1000..8999.
    assert (plus.start, plus.end) == (1000, 9000)
    assert plus.sequence == chr_a[1000:9000] and len(plus.sequence) == 8000
    assert plus.sequence[5000] == chr_a[6000]
    # Minus: offset -5000 is 17000, +2999 is 9001; TSS at column 5000.
    assert (minus.start, minus.end) == (9001, 17001)
    assert minus.sequence == reverse_complement(chr_a[9001:17001])
    assert minus.sequence[0] == chr_a[17000].translate(COMPLEMENT)
    assert minus.sequence[5000] == chr_a[12000].translate(COMPLEMENT)
    assert minus.sequence[7999] == chr_a[9001].translate(COMPLEMENT)


def test_windows_off_the_chromosome_end_unknown_chromosomes_and_n_runs_are_skipped(tiny_genome):
    path, _ = tiny_genome
    sites = [
        Tss("chrA", 248, "+", "starts_at_-1"),  # needs position -1
        Tss("chrA", 249, "+", "starts_at_0"),  # fits exactly
        Tss("chrB", 3950, "+", "ends_past_4000"),  # needs 3950 + 50 = 4000
        Tss("chrB", 3949, "+", "ends_at_3999"),
        Tss("chrB", 3751, "-", "minus_past_end"),  # upstream 3751 + 249 = 4000
        Tss("chrB", 49, "-", "minus_before_start"),  # downstream 49 - 50 = -1
        Tss("chrZ", 500, "+", "unknown"),
        Tss("chrA", 18_550, "+", "in_n_run"),
        Tss("B", 2000, "+", "alias"),  # chrB under another name
    ]
    with Genome(path) as genome:
        records, skipped = cut_tss_windows(genome, sites, TssWindow(-249, 51))
    assert [r.id.split("|")[0] for r in records] == ["starts_at_0", "ends_at_3999", "alias"]
    assert records[0].start == 0 and records[1].end == 4000 and records[2].chrom == "chrB"
    assert skipped == {"off_chromosome_end": 4, "unknown_chromosome": 1, "too_many_n": 1}
    with Genome(path) as genome:
        tolerant, _ = cut_tss_windows(genome, sites[7:8], TssWindow(-249, 51), max_n_fraction=0.5)
    assert tolerant[0].sequence.count("N") == 100


# -- TSS BED ------------------------------------------------------------------------------
def test_read_tss_bed_epdnew_8_columns_and_6_columns(tmp_path):
    bed = tmp_path / "tss.bed"
    bed.write_text(
        "track name=EPDnew\n"
        "# comment\n"
        "chr1\t894625\t894685\tNOC2L_1\t900\t-\t894635\t894636\n"  # EPDnew: 60 bp, thick = TSS
        "chr1\t959240\t959300\tKLHL17_1\t900\t+\t959289\t959290\n"
        "\n"
        "chr2 100 101 one_bp 0 +\n"  # 6 columns, whitespace-separated
    )
    assert read_tss_bed(bed) == [
        Tss("chr1", 894635, "-", "NOC2L_1"),
        Tss("chr1", 959289, "+", "KLHL17_1"),
        Tss("chr2", 100, "+", "one_bp"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("chr1\t100\t160\tP\t900\t+", "cannot tell where the TSS is"),
        ("chr1\t100\t101\tP\t900", "at least 6"),
        ("chr1\t100\t101\tP\t900\t.", "strand"),
        ("chr1\tx\t101\tP\t900\t+", "integers"),
        ("chr1\t100\t160\tP\t900\t+\t200\t201", "outside the interval"),
    ],
)
def test_read_tss_bed_rejects_bad_lines_with_the_line_number(tmp_path, line, message):
    bed = tmp_path / "bad.bed"
    bed.write_text("chr1\t10\t11\tok\t0\t+\n" + line + "\n")
    with pytest.raises(InputError, match=message) as err:
        read_tss_bed(bed)
    assert f"{bed}:2:" in str(err.value)


def test_read_tss_bed_empty(tmp_path):
    bed = tmp_path / "empty.bed"
    bed.write_text("track name=x\n")
    with pytest.raises(InputError, match="no TSS"):
        read_tss_bed(bed)


# -- sequence readers on the real files -----------------------------------------------------
def test_read_deepromoter_text_real(real_data):
    records = read_sequence_lines(real_data / "promoters" / "mm_pos_TATA.txt", label=1)
    assert len(records) == 300  # tests/data: the first 300 lines
    assert {len(r.sequence) for r in records} == {300}
    assert records[0].id == "mm_pos_TATA:1" and records[0].sequence.startswith("AAAAAGAAAAATGC")
    assert records[0].chrom is None and all(r.label == 1 for r in records)


def test_read_fasta_records_real_with_repeated_names(real_data):
    tata = read_fasta_records(real_data / "promoters" / "Mouse_tata.fa", label=1)
    nonprom = read_fasta_records(real_data / "promoters" / "Mouse_nonprom.fa", label=0)
    assert (len(tata), len(nonprom)) == (304, 302)  # tests/data: the first 300 and the duplicates
    assert {len(r.sequence) for r in tata + nonprom} == {251}  # Mouse_tata.fa wraps at 60 columns
    assert len({r.id for r in nonprom}) == 302  # names repeat in the file; ids do not
    assert nonprom[0].sequence.startswith("GCACCAAGTTTTCTCAACAAG")


# -- bad input ----------------------------------------------------------------------------
def test_text_reader_errors_name_the_line(tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("ACGTACGT\nACGTACG\n")
    with pytest.raises(InputError, match=r"lengths.txt:2: sequence is 7 bp but the first is 8 bp"):
        read_sequence_lines(lengths, 1)
    invalid = tmp_path / "invalid.txt"
    invalid.write_text("ACGTACGT\nACGTXCGT\n")
    with pytest.raises(InputError, match=r"invalid.txt:2: invalid character 'X'"):
        read_sequence_lines(invalid, 1)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(InputError, match="no sequences"):
        read_sequence_lines(empty, 1)


def test_text_reader_cleans_soft_masking_and_iupac(tmp_path):
    path = tmp_path / "soft.txt"
    path.write_text("acgtRYac\n")
    assert read_sequence_lines(path, 1)[0].sequence == "ACGTNNAC"


def test_fasta_reader_errors(tmp_path):
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    with pytest.raises(InputError, match="no FASTA records"):
        read_fasta_records(empty, 1)
    invalid = tmp_path / "invalid.fa"
    invalid.write_text(">good\nACGT\n>bad one\nAC*T\n")
    with pytest.raises(InputError, match=r"\(record 'bad'\): invalid character '\*'"):
        read_fasta_records(invalid, 1)
    no_sequence = tmp_path / "nosequence.fa"
    no_sequence.write_text(">a\n>b\nACGT\n")
    with pytest.raises(InputError, match=r"record 'a'\): record has no sequence"):
        read_fasta_records(no_sequence, 1)


def test_windows_from_the_real_soft_masked_hg19_fragment(real_data, tmp_path):
    """Windows come back uppercase (soft-masking removed) and minus-strand windows reverse-complemented."""
    fasta = real_data / "genomes" / "chr17.hg19.part.fa"
    chrom = "".join(line.strip() for line in fasta.read_text().splitlines()[1:])
    bed = tmp_path / "tss.bed"
    bed.write_text(
        "chr17\t19951\t20011\tA_1\t900\t+\t20000\t20001\nchr17\t29990\t30050\tB_1\t900\t-\t30000\t30001\n"
    )
    with Genome(fasta) as genome:
        (plus, minus), skipped = cut_tss_windows(genome, read_tss_bed(bed), WINDOW_PRESETS["deepromoter"])
    assert not skipped
    assert plus.sequence == chrom[19751:20051].upper()
    assert minus.sequence == reverse_complement(chrom[29950:30250].upper())
    assert any(c.islower() for c in chrom[19751:20051] + chrom[29950:30250])  # the fragment is soft-masked
