"""Genome random access (plain, bgzip), aliases, and the stream-only gzip path."""

from __future__ import annotations

import random

import pytest
from Bio import bgzf

from genolong.cli.main import main
from genolong.core.errors import UserError
from genolong.dna.genome import Genome, canonical_chrom, is_bgzip
from genolong.dna.sequence import read_fasta, reverse_complement, write_fasta


@pytest.mark.parametrize("a, b", [("chr1", "1"), ("chrM", "MT"), ("chrMT", "M"), ("chrX", "X")])
def test_aliases(a, b):
    assert canonical_chrom(a) == canonical_chrom(b)


@pytest.fixture
def small_genome(tmp_path):
    rng = random.Random(0)
    records = [("chr1", "".join(rng.choice("ACGTacgt") for _ in range(5000)) + "RYN"),
               ("chrM", "".join(rng.choice("ACGT") for _ in range(777)))]
    write_fasta(tmp_path / "g.fa", records, width=70)
    with bgzf.BgzfWriter(str(tmp_path / "g.fa.gz"), "wb") as out:
        out.write((tmp_path / "g.fa").read_text())
    return tmp_path, {name: seq.upper().replace("R", "N").replace("Y", "N") for name, seq in records}


@pytest.mark.parametrize("name", ["g.fa", "g.fa.gz"])
def test_random_slices_equal_the_sequence(small_genome, name):
    folder, truth = small_genome
    if name.endswith(".gz"):
        assert is_bgzip(folder / name)
    rng = random.Random(1)
    with Genome(folder / name) as genome:
        assert genome.chromosomes == {k: len(v) for k, v in truth.items()}
        for _ in range(50):
            chrom = rng.choice(list(truth))
            start = rng.randrange(len(truth[chrom]))
            end = rng.randrange(start, len(truth[chrom]) + 1)
            assert genome.fetch(chrom, start, end) == truth[chrom][start:end]
            assert genome.fetch(chrom.removeprefix("chr"), start, end, "-") == reverse_complement(
                truth[chrom][start:end])
        assert genome.fetch("MT", 0, 5) == truth["chrM"][:5]


def test_index_is_never_written_beside_the_data(small_genome):
    folder, _ = small_genome
    with Genome(folder / "g.fa") as genome:
        genome.fetch("chr1", 0, 10)
    assert not (folder / "g.fa.fai").exists()


def test_errors(small_genome, tmp_path):
    folder, _ = small_genome
    with Genome(folder / "g.fa") as genome:
        with pytest.raises(UserError, match="chromosome 'chr2' not in"):
            genome.fetch("chr2", 0, 1)
        with pytest.raises(UserError, match="outside chr1"):
            genome.fetch("chr1", 10, 10_000)
    with pytest.raises(UserError, match="no such genome"):
        Genome(tmp_path / "missing.fa")


def test_plain_gzip_streams_but_refuses_random_access(real_data, capsys):
    path = real_data / "genomes" / "ce2chrX.fa.gz"
    genome = Genome(path)
    assert not genome.random_access
    with pytest.raises(UserError, match="genolong genome prepare"):
        genome.fetch("chrX", 0, 10)
    assert main(["genome", "region", str(path), "chrX:0-10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bgzip" in err


def test_real_fragment_matches_streamed_sequence(real_data):
    path = real_data / "genomes" / "chr17.hg19.part.fa"
    (record,) = list(read_fasta(path))
    with Genome(path) as genome:
        assert genome.fetch("17", 1234, 5678) == record.sequence[1234:5678]
