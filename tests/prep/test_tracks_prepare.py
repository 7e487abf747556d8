"""``genolong task prepare`` with coverage tracks, on small hand-made genomes and bigWigs."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from helpers.cli import one_line
from helpers.tracks import write_bigwig

from genolong.cli.main import main
from genolong.core.errors import InputError
from genolong.datasets.tracks import TrackDataset
from genolong.prep.track_targets import TrackSpec, bin_coverage, read_targets_table

HEADER = "identifier\tfile\tdescription\tstrand_pair\tsum_stat\tclip\tclip_soft\tscale\n"


def spec(**fields) -> TrackSpec:
    return TrackSpec(index=0, identifier="t", file=None, **fields)


def test_bins_follow_the_borzoi_rules_by_hand():
    values = np.array([1, 1, 2, 4, 0, 0, 0, np.nan], dtype=np.float32)
    assert bin_coverage(values, 4, spec(sum_stat="sum")).tolist() == [8, 0]
    assert bin_coverage(values, 4, spec(sum_stat="mean")).tolist() == [2, 0]
    assert bin_coverage(values, 4, spec(sum_stat="max")).tolist() == [4, 0]
    assert bin_coverage(values, 4, spec(sum_stat="sum_sqrt")).tolist() == [2, 0]  # sqrt(1 + 8) - 1
    assert bin_coverage(values, 4, spec(sum_stat="sum", scale=0.5)).tolist() == [4, 0]
    soft = bin_coverage(values, 4, spec(sum_stat="sum", clip_soft=3.0))  # 3 - 1 + sqrt(8 - 3 + 1)
    assert soft.dtype == np.float16 and soft[0] == np.float16(2 + np.sqrt(6)) and soft[1] == 0
    assert bin_coverage(values, 4, spec(sum_stat="sum", clip_soft=3.0, clip=4.0)).tolist() == [4, 0]
    assert bin_coverage(np.full(4, 1e6, np.float32), 4, spec(sum_stat="sum")).tolist() == [65504]


def write_table(path, rows) -> str:
    path.write_text(HEADER + "".join("\t".join(map(str, row)) + "\n" for row in rows))
    return str(path)


def test_targets_table_errors_name_the_line(tmp_path):
    bw = write_bigwig(tmp_path / "a.bw", {"chr1": np.ones(8)})
    good = read_targets_table(write_table(tmp_path / "t.tsv", [["p", "a.bw", "CAGE:x", 1, "sum", "", "", 1],
                                                              ["m", bw, "CAGE:x", 0, "sum", 384, 64, 0.3]]))
    assert [(s.clip, s.clip_soft, s.scale, s.file.name) for s in good] == [(None, None, 1, "a.bw"), (384, 64, 0.3, "a.bw")]
    assert good[0].entry()["group"] == "CAGE"
    cases = [([["p", "a.bw", "", 0, "sum_log", "", "", 1]], "bad.tsv:2: unknown sum_stat 'sum_log'"),
             ([["p", "a.bw", "", 1, "sum", "", "", 1], ["m", "a.bw", "", 1, "sum", "", "", 1]], "does not pair back"),
             ([["p", "b.bw", "", 0, "sum", "", "", 1]], "bigWig"),
             ([["p", "a.bw", "", 0, "sum", "x", "", 1]], "clip must be a number"),
             ([["p", "a.bw", "", 0, "sum", "", "", 1], ["p", "a.bw", "", 1, "sum", "", "", 1]], "repeats row 2")]
    for rows, message in cases:
        with pytest.raises(InputError, match=message):
            read_targets_table(write_table(tmp_path / "bad.tsv", rows))
    (tmp_path / "nofile.tsv").write_text("identifier\tdescription\nx\ty\n")
    with pytest.raises(InputError, match="no file column"):
        read_targets_table(tmp_path / "nofile.tsv")


@pytest.fixture
def genome(tmp_path):
    """chr1 (1,000 bp) and chr2 (600 bp) of seeded bases, gzip-compressed; coverage per base on both."""
    rng = np.random.default_rng(0)
    sequences = {"chr1": "".join(rng.choice(list("ACGT"), 1000)), "chr2": "".join(rng.choice(list("ACGT"), 600))}
    path = tmp_path / "genome.fa.gz"
    with gzip.open(path, "wt") as handle:
        handle.writelines(f">{name}\n{seq}\n" for name, seq in sequences.items())
    coverage = {name: rng.integers(0, 5, len(seq)).astype(np.float64) for name, seq in sequences.items()}
    coverage["chr1"][100:120] = np.nan
    return path, sequences, coverage


def prepare(tmp_path, *argv):
    out = tmp_path / "out"
    return main(["task", "prepare", *map(str, argv), "--out", str(out)]), out


def test_regions_prepare_hand_checked_windows_and_targets(tmp_path, genome):
    fasta, sequences, coverage = genome
    plus = write_bigwig(tmp_path / "plus.bw", {"1": coverage["chr1"], "2": coverage["chr2"]})  # other naming
    minus = write_bigwig(tmp_path / "minus.bw", {"chr1": 2 * coverage["chr1"], "chr2": 2 * coverage["chr2"]})
    table = write_table(tmp_path / "targets.tsv", [["a+", plus, "CAGE:a", 1, "sum", "", "", 1],
                                                   ["a-", minus, "CAGE:a", 0, "mean", "", "", 0.5]])
    (tmp_path / "regions.bed").write_text("chr1\t400\t500\tr1\t0\t+\ttrain\nchr1\t50\t100\tr2\t0\t+\tvalid\n"
                                          "chr2\t500\t600\tr3\t0\t+\ttest\n")
    code, out = prepare(tmp_path, "--genome", fasta, "--tracks", table, "--regions", tmp_path / "regions.bed",
                        "--split-column", 7, "--input-bp", 256, "--bin-bp", 16, "--target-bp", 128)
    assert code == 0
    with TrackDataset(out) as data:
        assert (data.input_bp, data.bin_bp, data.target_offset_bp, data.target_bins) == (256, 16, 64, 8)
        assert data.strand_pair.tolist() == [1, 0] and data.groups == ["CAGE", "CAGE"]
        train, valid, test = (data.split(name) for name in ("train", "valid", "test"))
        assert train.region(0) == ("chr1", 322, 578) and train.sequence(0) == sequences["chr1"][322:578]
        expected = np.nan_to_num(coverage["chr1"][386:514]).reshape(8, 16)
        assert np.array_equal(train.targets(0)[:, 0], expected.sum(axis=1))
        assert np.allclose(train.targets(0)[:, 1], expected.mean(axis=1), atol=1e-3)  # 2 x 0.5 x the mean
        assert valid.region(0) == ("chr1", -53, 203) and valid.sequence(0) == "N" * 53 + sequences["chr1"][:203]
        assert test.sequence(0) == sequences["chr2"][422:] + "N" * 78
        assert np.array_equal(test.targets(0)[:, 0], np.r_[coverage["chr2"][486:600], np.zeros(14)].reshape(
            8, 16).sum(axis=1))
        summary = data.manifest["summary"]
    assert summary["windows_padded_with_n"] == 2 and summary["bases_without_value"] == {"a+": 20, "a-": 20}
    assert data.manifest["splits"] == {"train": 1, "valid": 1, "test": 1}
    assert [entry["path"].endswith(name) for entry, name in zip(data.manifest["inputs"], [
        "genome.fa.gz", "regions.bed", "targets.tsv", "plus.bw", "minus.bw"], strict=True)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no work files left


def test_tiled_contigs_with_a_chromosome_split(tmp_path, genome, capsys):
    fasta, sequences, coverage = genome
    bw = write_bigwig(tmp_path / "a.bw", coverage)
    code, out = prepare(tmp_path, "--genome", fasta, "--bigwig", f"cov={bw}", "--tile", "--split", "chromosome",
                        "--valid-chroms", "chr2", "--input-bp", 512, "--bin-bp", 32, "--crop", 128)
    assert code == 0
    printed = capsys.readouterr().out  # chr2's last window (384..896) is 58% N: dropped
    assert "windows train 4, valid 2" in printed and "past a contig end: 4; dropped for more than 0.5 N: 1" in printed
    with TrackDataset(out) as data:
        train = data.split("train")
        assert [train.region(i)[1] for i in range(4)] == [-128, 128, 384, 640]  # targets tile chr1 from 0
        tiled = np.concatenate([train.targets(i)[:, 0] for i in range(4)])
        assert np.array_equal(tiled[:1000 // 32], np.nan_to_num(coverage["chr1"][:992]).reshape(-1, 32).sum(axis=1))
        assert data.tracks[0]["identifier"] == "cov" and data.manifest["summary"]["windows_dropped"] == {"too_many_n": 1}


@pytest.mark.parametrize("case, message", [
    ("unnamed", "has no chromosome 'chr2' of the genome"),
    ("short", "does not cover it"),
    ("split", "column 7 is 'holdout', not a split"),
    ("nsplit", "tracks need splits"),
    ("too_n", "no window kept"),
])
def test_bad_track_inputs_are_one_line_and_write_nothing(tmp_path, genome, capsys, case, message):
    fasta, sequences, coverage = genome
    lengths = {"chr2": 400} if case == "short" else None
    tracks = {"chr1": coverage["chr1"]} if case == "unnamed" else coverage
    bw = write_bigwig(tmp_path / "a.bw", tracks, lengths={**{k: len(v) for k, v in tracks.items()}, **(lengths or {})})
    (tmp_path / "r.bed").write_text("chr1\t400\t500\tr\t0\t+\ttrain\nchr2\t100\t200\tr\t0\t+\t"
                                    + ("holdout" if case == "split" else "test") + "\n")
    argv = ["--genome", fasta, "--bigwig", bw, "--regions", tmp_path / "r.bed", "--input-bp", 256, "--bin-bp", 16]
    argv += [] if case == "nsplit" else ["--split-column", 7]
    argv += ["--max-n-fraction", 0.1] if case == "too_n" else []
    if case == "too_n":
        (tmp_path / "r.bed").write_text("chr1\t0\t10\tr\t0\t+\ttrain\n")
    code, out = prepare(tmp_path, *argv)
    assert code == 2
    one_line(capsys, message)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_manifest_records_options_and_table_fields(tmp_path, genome):
    fasta, _, coverage = genome
    bw = write_bigwig(tmp_path / "a.bw", coverage)
    table = write_table(tmp_path / "t.tsv", [["d", bw, "DNASE:kidney", "", "mean", 128, 32, 2.0]])
    (tmp_path / "r.bed").write_text("chr1\t400\t500\n")
    code, out = prepare(tmp_path, "--genome", fasta, "--tracks", table, "--regions", tmp_path / "r.bed", "--split",
                        "random", "--input-bp", 128, "--bin-bp", 8)
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    track = manifest["tracks"][0]
    assert (track["strand_pair"], track["group"], track["clip"], track["clip_soft"], track["scale"]) == (
        0, "DNASE", 128, 32, 2.0)
    assert manifest["options"]["split"] == "random" and manifest["target_bins"] == 8
