"""Deduplication, splits, and whole dataset directories built through `genolong promoter prepare`."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from genolong.cli.main import main
from genolong.core.errors import ConfigError, UserError
from genolong.core.files import MARKER
from genolong.datasets.promoter import COLUMNS, PromoterRecord, load_manifest, load_split
from genolong.dna.sequence import write_fasta
from genolong.prep.promoter_dataset import PromoterDatasetConfig, build_promoter_dataset
from genolong.prep.promoters import TssWindow
from genolong.prep.splits import chromosome_split, deduplicate, stratified_random_split

SPLITS = ("train", "valid", "test")


def random_sequences(n: int, length: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), size=length)) for _ in range(n)]


def split_sequences(data_dir) -> dict[str, list[str]]:
    return {name: [r.sequence for r in load_split(data_dir, name)] for name in SPLITS}


def assert_no_sequence_in_two_splits(data_dir) -> None:
    sequences = split_sequences(data_dir)
    for name in SPLITS:
        assert len(set(sequences[name])) == len(sequences[name]), f"duplicate inside {name}"
    assert not set(sequences["train"]) & set(sequences["valid"])
    assert not set(sequences["train"]) & set(sequences["test"])
    assert not set(sequences["valid"]) & set(sequences["test"])


# -- dedup and splitters ------------------------------------------------------------------
def test_deduplicate_keeps_first_and_drops_conflicting_labels():
    records = [
        PromoterRecord("a", "AAAA", 1),
        PromoterRecord("b", "CCCC", 1),
        PromoterRecord("c", "AAAA", 1),
        PromoterRecord("d", "GGGG", 1),
        PromoterRecord("e", "GGGG", 0),
        PromoterRecord("f", "TTTT", 0),
    ]
    kept, dropped = deduplicate(records)
    assert [r.id for r in kept] == ["a", "b", "f"]
    assert dropped == {"duplicate": 1, "conflicting_label": 2}


def test_stratified_random_split_fractions_and_seed():
    records = [PromoterRecord(f"p{i}", s, 1) for i, s in enumerate(random_sequences(200, 30, 0))]
    records += [PromoterRecord(f"n{i}", s, 0) for i, s in enumerate(random_sequences(100, 30, 1))]
    splits = stratified_random_split(records, (0.7, 0.1, 0.2), np.random.default_rng(4))
    counts = {name: Counter(r.label for r in rows) for name, rows in splits.items()}
    assert counts == {"train": {1: 140, 0: 70}, "valid": {1: 20, 0: 10}, "test": {1: 40, 0: 20}}
    again = stratified_random_split(records, (0.7, 0.1, 0.2), np.random.default_rng(4))
    other = stratified_random_split(records, (0.7, 0.1, 0.2), np.random.default_rng(5))
    assert again == splits and other["test"] != splits["test"]
    with pytest.raises(ConfigError, match="summing to 1"):
        stratified_random_split(records, (0.8, 0.1, 0.2), np.random.default_rng(0))


def test_chromosome_split():
    records = [
        PromoterRecord(f"r{i}", s, i % 2, chrom, 0, 10, "+")
        for i, (s, chrom) in enumerate(zip(random_sequences(6, 10, 0), ["c1", "c2", "c3"] * 2, strict=True))
    ]
    splits = chromosome_split(records, ["c2"], ["c3"])
    assert {name: sorted({r.chrom for r in rows}) for name, rows in splits.items()} == {
        "train": ["c1"],
        "valid": ["c2"],
        "test": ["c3"],
    }
    with pytest.raises(UserError, match=r"\['c9'\] hold no example"):
        chromosome_split(records, ["c2"], ["c9"])
    with pytest.raises(UserError, match="needs genomic coordinates"):
        chromosome_split([PromoterRecord("x", "ACGT", 1)], ["c2"], ["c3"])


# -- whole datasets -----------------------------------------------------------------------
@pytest.fixture
def positives_with_duplicates(tmp_path):
    """120 distinct 60-bp promoters, 10 of them written twice."""
    sequences = random_sequences(120, 60, 9)
    path = tmp_path / "pos.txt"
    path.write_text("\n".join(sequences + sequences[:10]) + "\n")
    return path


@pytest.mark.parametrize("method", ["substitution", "shuffle"])
def test_derived_negative_dataset(tmp_path, positives_with_duplicates, method):
    out = tmp_path / "data"
    manifest = build_promoter_dataset(
        PromoterDatasetConfig(text=positives_with_duplicates, negatives=method), out
    )
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "manifest.json", "test.tsv", "train.tsv", "valid.tsv"]
    assert manifest["counts"] == {
        "train": {"0": 96, "1": 96},
        "valid": {"0": 12, "1": 12},
        "test": {"0": 12, "1": 12},
    }
    assert manifest["deduplication"] == {"conflicting_label": 0, "derived_collision": 0, "duplicate": 10}
    assert manifest["negatives"]["method"] == method and manifest["sequence_length"] == 60
    assert manifest["sources"][0]["sha256"] and manifest["seed"] == 42
    assert_no_sequence_in_two_splits(out)
    # Each negative sits in the split of the positive it was made from.
    for name in SPLITS:
        rows = load_split(out, name)
        positive_ids = {r.id for r in rows if r.label == 1}
        assert {r.id.split("|")[0] for r in rows if r.label == 0} == positive_ids
    assert (out / "train.tsv").read_text().startswith("\t".join(COLUMNS) + "\n")
    assert load_split(out, "test")[0].chrom is None


def test_real_negative_dataset_and_seeds(tmp_path, real_data):
    promoters = real_data / "promoters"

    def build(seed: int, name: str) -> dict:
        config = PromoterDatasetConfig(
            fasta=promoters / "Mouse_tata.fa",
            negatives="fasta",
            negative_fasta=promoters / "Mouse_nonprom.fa",
            seed=seed,
        )
        return build_promoter_dataset(config, tmp_path / name)

    manifest = build(1, "a")
    build(1, "b")
    build(2, "c")
    assert manifest["deduplication"]["duplicate"] == 3  # two promoters twice, one non-promoter twice
    total = {label: sum(manifest["counts"][s][label] for s in SPLITS) for label in ("0", "1")}
    assert total == {"0": 301, "1": 302}  # tests/data: 302 non-promoters and 304 promoters
    assert manifest["counts"]["test"] == {"0": 30, "1": 30}
    assert_no_sequence_in_two_splits(tmp_path / "a")
    for name in (*[f"{s}.tsv" for s in SPLITS], "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert split_sequences(tmp_path / "a")["test"] != split_sequences(tmp_path / "c")["test"]


@pytest.fixture
def genome_and_bed(tmp_path):
    """Three 30-kb chromosomes with 6 TSSs each (both strands)."""
    sequences = random_sequences(3, 30_000, 21)
    genome = tmp_path / "genome.fa"
    write_fasta(genome, [(f"chr{i + 1}", s) for i, s in enumerate(sequences)])
    bed = tmp_path / "tss.bed"
    lines = [
        f"chr{c}\t{p - 49}\t{p + 11}\tg{c}_{p}\t900\t+\t{p}\t{p + 1}"
        if k % 2 == 0
        else f"chr{c}\t{p - 10}\t{p + 50}\tg{c}_{p}\t900\t-\t{p}\t{p + 1}"
        for c in (1, 2, 3)
        for k, p in enumerate(range(3000, 27001, 4800))
    ]
    bed.write_text("\n".join(lines) + "\n")
    return genome, bed


def test_tss_dataset_with_genomic_negatives_and_chromosome_split(tmp_path, genome_and_bed):
    genome, bed = genome_and_bed
    out = tmp_path / "data"
    config = PromoterDatasetConfig(
        tss_bed=bed,
        genome=genome,
        negatives="genomic",
        min_tss_distance=500,
        split="chromosome",
        valid_chroms=("2",),
        test_chroms=("chr3",),
    )
    manifest = build_promoter_dataset(config, out)
    assert manifest["positives"]["window"] == {"start": -249, "end": 51, "length": 300, "tss_column": 249}
    assert manifest["positives"]["kept"] == 18
    assert {name: {r.chrom for r in load_split(out, name)} for name in SPLITS} == {
        "train": {"chr1"},
        "valid": {"chr2"},
        "test": {"chr3"},
    }
    assert sum(c["0"] for c in manifest["counts"].values()) == 18
    assert [s["role"] for s in manifest["sources"]] == ["tss_bed", "genome"]
    assert_no_sequence_in_two_splits(out)


def test_tss_dataset_long_window(tmp_path, genome_and_bed):
    genome, bed = genome_and_bed
    config = PromoterDatasetConfig(
        tss_bed=bed, genome=genome, window=TssWindow(-5000, 3000), negatives="shuffle"
    )
    manifest = build_promoter_dataset(config, tmp_path / "long")
    # Per chromosome, '+' at 3000 lacks 5 kb upstream and '-' at 27000 lacks 5 kb upstream (27000 + 5000 > 30000).
    assert manifest["sequence_length"] == 8000
    assert manifest["positives"]["skipped"] == {"off_chromosome_end": 6}
    assert manifest["positives"]["kept"] == 12
    assert manifest["counts"]["train"]["0"] == manifest["counts"]["train"]["1"]


# -- the command line -----------------------------------------------------------------------
def test_cli_prepare_and_errors(tmp_path, positives_with_duplicates, capsys):
    out = tmp_path / "cli"
    assert (
        main(
            [
                "promoter",
                "prepare",
                "--text",
                str(positives_with_duplicates),
                "--out",
                str(out),
                "--negatives",
                "shuffle",
                "--seed",
                "3",
                "--fractions",
                "0.5,0.25,0.25",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "negatives: shuffle" in printed and "duplicate 10" in printed
    assert load_manifest(out)["split"]["fractions"] == [0.5, 0.25, 0.25]
    # An existing directory is kept unless --overwrite.
    assert main(["promoter", "prepare", "--text", str(positives_with_duplicates), "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err


def bad_input_runs(tmp_path) -> list[tuple[list[str], str]]:
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    pos = tmp_path / "pos.fa"
    write_fasta(pos, [("p1", "ACGT" * 10), ("p2", "ACGA" * 10)])
    short_neg = tmp_path / "neg.fa"
    write_fasta(short_neg, [("n1", "ACGT" * 9)])
    invalid = tmp_path / "invalid.txt"
    invalid.write_text("ACGTACGTACGTACGTACGTAC\nACGTACGTACGTAC-TACGTAC\n")
    return [
        (["--fasta", str(empty)], "no FASTA records"),
        (["--text", str(tmp_path / "missing.txt")], "missing.txt: no such file"),
        (
            ["--fasta", str(pos), "--negatives", "fasta", "--negative-fasta", str(short_neg)],
            "record 'neg:1' is 36 bp but 'pos:1' is 40 bp",
        ),
        (["--text", str(invalid)], "invalid.txt:2: invalid character '-'"),
        (["--text", str(invalid), "--fasta", str(pos)], "exactly one positive source"),
        (["--fasta", str(pos), "--negatives", "genomic"], "genomic negatives need --tss and --genome"),
        (["--fasta", str(pos), "--split", "chromosome"], "a chromosome split needs --valid-chroms"),
        (
            ["--fasta", str(pos), "--valid-chroms", "chr8"],
            "--valid-chroms applies only with --split chromosome",
        ),
        (
            [
                "--fasta",
                str(pos),
                "--negatives",
                "fasta",
                "--negative-fasta",
                str(pos),
                "--per-positive",
                "2",
            ],
            "--per-positive applies only with substitution, shuffle or genomic negatives",
        ),
        (
            ["--fasta", str(pos), "--min-tss-distance", "5000"],
            "--min-tss-distance applies only with --negatives genomic",
        ),
        (
            ["--fasta", str(pos), "--negative-fasta", str(pos)],
            "--negative-fasta applies only with --negatives fasta",
        ),
        (["--fasta", str(pos), "--window=-10..5"], "START:END"),
        (["--fasta", str(pos), "--window", "bigbird"], "--window applies only with --tss"),
    ]


def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    for extra, message in bad_input_runs(tmp_path):
        out = tmp_path / "never"
        assert main(["promoter", "prepare", "--out", str(out), *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
        assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".never")]  # no temporary left over


def test_manifest_is_json_with_counts(tmp_path, positives_with_duplicates):
    out = tmp_path / "d"
    build_promoter_dataset(PromoterDatasetConfig(text=positives_with_duplicates), out)
    manifest = json.loads((out / "manifest.json").read_text())
    for name in SPLITS:
        rows = load_split(out, name)
        assert manifest["counts"][name] == {
            "0": sum(r.label == 0 for r in rows),
            "1": sum(r.label for r in rows),
        }
