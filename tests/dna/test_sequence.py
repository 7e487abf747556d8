"""DNA cleaning, reverse complement and the FASTA reader, on hand cases and the real genomes."""

from __future__ import annotations

import gzip
import random
import re

import pytest

from genolong.core.errors import InputError
from genolong.dna.sequence import InvalidSequenceError, clean, read_fasta, reverse_complement, write_fasta


def test_clean_uppercases_soft_mask_and_maps_iupac_to_n():
    assert clean("acgtACGT") == "ACGTACGT"
    assert clean("RYSWKMBDHVNryswkmbdhvn") == "N" * 22


@pytest.mark.parametrize("bad, char", [("AC1G", "1"), ("ACXG", "X"), ("AC*G", "*"), ("AC-G", "-"), ("A G", " ")])
def test_clean_rejects_characters_outside_iupac(bad, char):
    with pytest.raises(InvalidSequenceError, match=re.escape(f"invalid character {char!r} at position")):
        clean(bad)


def test_reverse_complement_hand_cases():
    assert reverse_complement("AACGTN") == "NACGTT"
    assert reverse_complement("acgR") == "Ycgt"
    seq = "ACGTTGCAANNRYKM"
    assert reverse_complement(reverse_complement(seq)) == seq


def _write(tmp_path, text: str, name="x.fa", compress=False):
    path = tmp_path / name
    if compress:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_read_fasta_records_names_and_cleaning(tmp_path, compress):
    path = _write(tmp_path, ">a desc here\nacgt\nNNRY\n\n>b\nTTTT\n", compress=compress)
    records = list(read_fasta(path))
    assert [(r.name, r.sequence, r.description) for r in records] == [("a", "ACGTNNNN", "desc here"),
                                                                       ("b", "TTTT", "")]
    raw = list(read_fasta(path, raw=True))
    assert raw[0].sequence == "acgtNNRY"


@pytest.mark.parametrize(
    "text, message, line",
    [
        ("", "empty file", None),
        ("\n\n", "empty file", None),
        ("ACGT\n", "expected a FASTA header", 1),
        (">a\nACGT\nAC1T\n", "invalid character '1' (column 3)", 3),
        (">a\nACGT\n>b\nACXT\n", "invalid character 'X'", 4),
        (">a\nAC*T\n", "invalid character '*'", 2),
        (">a\nACGT\n>a\nACGT\n", "duplicate record name", 3),
        (">a\n>b\nACGT\n", "record has no sequence", 1),
        (">\nACGT\n", "no record name", 1),
    ],
)
def test_read_fasta_errors_name_file_and_line(tmp_path, text, message, line):
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=re.escape(message)) as info:
        list(read_fasta(path))
    assert str(path) in str(info.value)
    assert info.value.line == line


def test_truncated_gzip_is_a_clear_error(tmp_path):
    rng = random.Random(0)
    seq = "".join(rng.choice("ACGT") for _ in range(200_000))
    full = _write(tmp_path, ">a\n" + seq + "\n", name="full.fa.gz", compress=True)
    cut = tmp_path / "cut.fa.gz"
    cut.write_bytes(full.read_bytes()[:2000])
    with pytest.raises(InputError, match="cannot read"):
        list(read_fasta(cut))


def test_write_fasta_round_trip(tmp_path):
    records = [("one", "ACGT" * 40), ("two", "N" * 7)]
    write_fasta(tmp_path / "o.fa", records, width=50)
    assert [(r.name, r.sequence) for r in read_fasta(tmp_path / "o.fa")] == records
    assert max(len(line) for line in (tmp_path / "o.fa").read_text().splitlines()) == 50


def test_real_genomes_read_with_expected_lengths(real_data):
    lengths = {
        "chr17.hg19.part.fa": 40_000,
        "MT-human_NC_012920.1.fa": 16_569,
        "yeast_sacCer_chrI_from_Biostrings_yeastSEQCHR1.fa": 100_020,  # tests/data: the first 1,667 lines
        "ce2chrX.fa.gz": 150_000,  # tests/data: the first 150 kbp
    }
    for name, length in lengths.items():
        (record,) = list(read_fasta(real_data / "genomes" / name))
        assert len(record) == length, name
        assert set(record.sequence) <= set("ACGTN")
    (chr17,) = list(read_fasta(real_data / "genomes" / "chr17.hg19.part.fa", raw=True))
    soft = sum(c.islower() for c in chr17.sequence) / len(chr17)
    assert soft == pytest.approx(0.435, abs=0.005)  # README: 43.5 % soft-masked
