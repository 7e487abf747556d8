"""Genome preparation: BGZF/plain FASTA with .fai/.gzi equal to pyfaidx's, exact slices, the table."""

from __future__ import annotations

import gzip
import random

import pyfaidx
import pytest

from genolong.core.errors import ConfigError, InputError, UserError
from genolong.dna.genome import Genome
from genolong.dna.sequence import read_fasta
from genolong.prep.genome_prepare import index_paths, is_assembled_chromosome, normalise_name, prepare_genome


def random_dna(rng: random.Random, length: int) -> str:
    """Soft-masked stretches, N gaps and an IUPAC code, like a real assembly."""
    seq = [rng.choice("ACGT") for _ in range(length)]
    for _ in range(length // 500 + 1):
        start = rng.randrange(length)
        span = slice(start, start + rng.randrange(1, 300))
        seq[span] = [base.lower() for base in seq[span]]
    for _ in range(length // 2000 + 1):
        start = rng.randrange(length)
        seq[start : start + rng.randrange(1, 100)] = ["N"] * len(seq[start : start + 100])
    seq[rng.randrange(length)] = "R"
    return "".join(seq)[:length]


@pytest.fixture(scope="module")
def genome_records() -> dict[str, str]:
    rng = random.Random(11)
    # lengths: a multiple of the line width, a single base, and enough for several BGZF blocks
    lengths = {"chr1": 150_000, "chrUn_gl000220": 60, "chr2": 1, "chrM": 16_571, "chrX": 70_001}
    return {name: random_dna(rng, length) for name, length in lengths.items()}


@pytest.fixture
def gzipped_fasta(tmp_path, genome_records):
    """The records as gzip FASTA with ragged input lines (77, then 13-column lines)."""
    path = tmp_path / "input" / "toy.fa.gz"
    path.parent.mkdir()
    with gzip.open(path, "wt") as out:
        for name, seq in genome_records.items():
            out.write(f">{name} some description\n")
            width = 77 if name != "chrX" else 13
            out.writelines(seq[i : i + width] + "\n" for i in range(0, len(seq), width))
    return path


def test_bgzip_output_slices_like_the_input_and_indexes_match_pyfaidx(
    tmp_path, gzipped_fasta, genome_records
):
    out = tmp_path / "toy.fa.bgz"
    prepared = prepare_genome(gzipped_fasta, out, progress=False)
    fai, gzi, table = index_paths(out)
    assert (prepared.path, prepared.fai, prepared.gzi, prepared.table) == (out, fai, gzi, table)
    assert [c.name for c in prepared.chromosomes] == list(genome_records)

    # pyfaidx builds its own indexes (into other paths) from our output: they must be identical
    reference = pyfaidx.Faidx(
        str(out), indexname=str(tmp_path / "ref.fai"), gzi_indexname=str(tmp_path / "ref.gzi")
    )
    reference.close()
    assert fai.read_text() == (tmp_path / "ref.fai").read_text()
    assert gzi.read_bytes() == (tmp_path / "ref.gzi").read_bytes()
    assert len(gzi.read_bytes()) > 8 + 16  # several blocks, so the .gzi is really exercised

    # pyfaidx opens our indexes without rebuilding them, and every slice equals the input
    mtimes = (fai.stat().st_mtime_ns, gzi.stat().st_mtime_ns)
    rng = random.Random(3)
    with pyfaidx.Fasta(str(out), as_raw=True) as fasta:
        for name, seq in genome_records.items():
            assert fasta[name][:] == seq
            for _ in range(50):
                start = rng.randrange(len(seq))
                end = rng.randrange(start, len(seq)) + 1
                assert fasta[name][start:end] == seq[start:end]
    assert (fai.stat().st_mtime_ns, gzi.stat().st_mtime_ns) == mtimes


def test_chromosome_table_counts_n_and_soft_masked_bases(tmp_path, gzipped_fasta, genome_records):
    prepared = prepare_genome(gzipped_fasta, tmp_path / "toy.fa.bgz", progress=False)
    rows = [line.split("\t") for line in prepared.table.read_text().splitlines()]
    assert rows[0] == ["name", "length", "n_fraction", "softmasked_fraction"]
    for row, (name, seq) in zip(rows[1:], genome_records.items(), strict=True):
        n = sum(base in "Nn" for base in seq)
        lower = sum(base.islower() for base in seq)
        assert row == [name, str(len(seq)), f"{n / len(seq):.6f}", f"{lower / len(seq):.6f}"]
    assert prepared.chromosomes[0].softmasked_fraction > 0.1  # the fixture is really soft-masked


def test_plain_output_with_80_columns(tmp_path, gzipped_fasta, genome_records):
    out = tmp_path / "toy.fa"
    prepared = prepare_genome(gzipped_fasta, out, plain=True, line_width=80, progress=False)
    assert prepared.gzi is None and not index_paths(out)[1].exists()
    text = out.read_text()
    assert not text.startswith("\x1f") and max(len(line) for line in text.splitlines()) == 80
    reference = pyfaidx.Faidx(str(out), indexname=str(tmp_path / "ref.fai"))
    reference.close()
    assert prepared.fai.read_text() == (tmp_path / "ref.fai").read_text()
    with pyfaidx.Fasta(str(out), as_raw=True) as fasta:
        assert {name: fasta[name][:] for name in genome_records} == genome_records


def test_names_are_normalised_and_contigs_kept_or_dropped(tmp_path, gzipped_fasta):
    ensembl = prepare_genome(gzipped_fasta, tmp_path / "e.fa.bgz", names="ensembl", progress=False)
    assert [c.name for c in ensembl.chromosomes] == ["1", "chrUn_gl000220", "2", "MT", "X"]
    primary = prepare_genome(gzipped_fasta, tmp_path / "p.fa.bgz", names="ucsc", primary=True, progress=False)
    assert [c.name for c in primary.chromosomes] == ["chr1", "chr2", "chrM", "chrX"]
    with Genome(primary.path) as genome:  # the package's Genome reads the result, aliases and all
        assert genome.fetch("MT", 10, 20) == genome.fetch("chrM", 10, 20)


@pytest.mark.parametrize(
    ("name", "ucsc", "ensembl", "assembled"),
    [
        ("chr1", "chr1", "1", True),
        ("22", "chr22", "22", True),
        ("MT", "chrM", "MT", True),
        ("chrM", "chrM", "MT", True),
        ("chrIV", "chrIV", "IV", True),
        ("GL000191.1", "GL000191.1", "GL000191.1", False),
        ("chr6_apd_hap1", "chr6_apd_hap1", "chr6_apd_hap1", False),
    ],
)
def test_normalise_name(name, ucsc, ensembl, assembled):
    assert (normalise_name(name, "ucsc"), normalise_name(name, "ensembl")) == (ucsc, ensembl)
    assert normalise_name(name, "keep") == name and is_assembled_chromosome(name) == assembled


def test_bad_requests_are_user_errors(tmp_path):
    fasta = tmp_path / "x.fa"
    fasta.write_text(">chrM\nACGT\n>MT\nACGT\n")
    with pytest.raises(InputError, match="two records are named 'chrM' after renaming"):
        prepare_genome(fasta, tmp_path / "y.fa.bgz", names="ucsc", progress=False)
    with pytest.raises(UserError, match="overwrite the input"):
        prepare_genome(fasta, fasta, plain=True, progress=False)
    with pytest.raises(ConfigError, match="unknown chromosome name style"):
        prepare_genome(fasta, tmp_path / "y.fa.bgz", names="refseq", progress=False)
    contigs = tmp_path / "contigs.fa"
    contigs.write_text(">GL000191.1\nACGT\n")
    with pytest.raises(InputError, match="no records left"):
        prepare_genome(contigs, tmp_path / "z.fa.bgz", primary=True, progress=False)
    assert not (tmp_path / "y.fa.bgz").exists() and not (tmp_path / "z.fa.bgz").exists()


def test_default_output_goes_to_the_working_directory(real_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = real_data / "genomes" / "MT-human_NC_012920.1.fa"
    prepared = prepare_genome(source, progress=False)
    assert prepared.path == tmp_path / "MT-human_NC_012920.1.fa.bgz"
    assert prepare_genome(
        real_data / "genomes" / "ce2chrX.fa.gz", plain=True, primary=True, progress=False
    ).path == (tmp_path / "ce2chrX.fa")
    assert sorted(path.name for path in source.parent.iterdir() if ".bgz" in path.name) == []


def test_real_worm_chromosome_slices_exactly(real_data, tmp_path):
    """ce2 chrX (its first 150 kbp, plain gzip; three bgzip blocks): random intervals of the bgzip copy equal the original."""
    source = real_data / "genomes" / "ce2chrX.fa.gz"
    prepared = prepare_genome(source, tmp_path / "ce2chrX.fa.bgz", progress=False)
    (record,) = read_fasta(source, raw=True)
    assert (
        [(c.name, c.length) for c in prepared.chromosomes]
        == [("chrX", 150_000)]
        == [(record.name, len(record))]
    )
    rng = random.Random(2020)
    with pyfaidx.Fasta(str(prepared.path), as_raw=True) as fasta:
        chrom = fasta["chrX"]
        for _ in range(500):
            start = rng.randrange(len(record))
            end = min(len(record), start + rng.choice([1, 59, 60, 61, 1000, 65_536, 300_000]))
            assert chrom[start:end] == record.sequence[start:end]
        assert chrom[len(record) - 70 :] == record.sequence[-70:]
