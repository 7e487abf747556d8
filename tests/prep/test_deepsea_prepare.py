"""``genolong chromatin prepare`` (genolong/prep/chromatin_dataset.py): round trips, genome context, resume, errors."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
from helpers.deepsea import (
    CENTRE,
    deepsea_rows,
    real_rows,
    synthetic_genome,
    write_bundle,
    write_mat_v5,
    write_mat_v73,
)

import genolong.cli.main as cli
from genolong.core.errors import ConfigError, InputError, UserError
from genolong.core.files import MARKER
from genolong.datasets.chromatin import LocateStatus, PreparedChromatin
from genolong.dna.sequence import reverse_complement, write_fasta
from genolong.prep.chromatin_dataset import prepare_chromatin
from genolong.prep.chromatin_job import ChromatinJob
from genolong.prep.deepsea import DeepSEAMat


@pytest.fixture(scope="module")
def rows(real_data):
    return deepsea_rows(real_data)


@pytest.fixture(scope="module")
def bundle(rows, tmp_path_factory):
    return write_bundle(tmp_path_factory.mktemp("deepsea") / "mat", *rows)


@pytest.fixture(scope="module")
def genome(real_data, tmp_path_factory):
    """FASTA of the synthetic genome embedding the 100 real 8 kb rows, and their expected loci."""
    windows, _ = real_rows(real_data)
    records, expected = synthetic_genome(windows)
    path = tmp_path_factory.mktemp("genome") / "synthetic.fa"
    write_fasta(path, records)
    return path, windows, expected


def arrays(directory, split):
    return {path.name: np.load(path) for path in sorted(directory.glob(f"{split}.*.npy"))}


def test_round_trip_without_genome(rows, bundle, tmp_path):
    sequences, labels = rows
    out = tmp_path / "prepared"
    manifest = prepare_chromatin(bundle, out, chunk_rows=64)
    assert sorted(path.name for path in out.iterdir()) == sorted(
        ["manifest.json", MARKER]
        + [f"{split}.{name}.npy" for split in ("train", "valid", "test") for name in ("sequences", "labels")]
    )
    assert not list(tmp_path.glob(".*"))  # no work directory left behind
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert (manifest["input_length"], manifest["context"], manifest["genome"]) == (1000, 1000, None)
    prepared = PreparedChromatin(out)
    for split, source_format in (
        ("train", "MATLAB v7.3 (HDF5)"),
        ("valid", "MATLAB v5"),
        ("test", "MATLAB v5"),
    ):
        entry = manifest["splits"][split]
        source = bundle / f"{split}.mat"
        assert entry["source"] == {
            "path": str(source),
            "size": source.stat().st_size,
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "format": source_format,
        }
        assert (entry["rows_in"], entry["rows"], entry["positive_labels"]) == (200, 200, int(labels.sum()))
        assert entry["strand_pairs"]["layout"] == "halves"
        data = prepared[split]
        np.testing.assert_array_equal(data.sequences, sequences)
        np.testing.assert_array_equal(data.labels, labels)
        assert data.sequence(7) == data.central(7) == sequences[7].tobytes().decode()
        assert data.loci is None and data.located.all()


def test_genome_context_windows_equal_the_real_8kb_rows(bundle, genome, tmp_path):
    path, windows, expected = genome
    manifest = prepare_chromatin(bundle, tmp_path / "prepared", genome=path, chunk_rows=64)
    assert manifest["context"] == 8000 and manifest["unlocated"] == "keep"
    assert manifest["genome"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert manifest["genome"]["chromosomes"] == ["chrSynth1", "chrSynth2"]
    train = PreparedChromatin(tmp_path / "prepared")["train"]
    reverse = [reverse_complement(window) for window in windows]
    assert [train.sequence(row) for row in range(200)] == windows + reverse
    assert [train.central(row) for row in range(100)] == [window[CENTRE] for window in windows]
    for row, (chrom, start, strand) in expected.items():
        assert tuple(train.loci[row][["chrom", "start", "strand"]].tolist()) == (chrom, start, strand)
        assert tuple(train.loci[row + 100][["chrom", "start", "strand"]].tolist()) == (chrom, start, -strand)
    summary = manifest["splits"]["train"]["locate"]
    assert summary["located"] == 200 and summary["located_fraction"] == 1.0
    plus_share = np.mean([strand > 0 for _, _, strand in expected.values()])
    assert summary["plus_strand_fraction"] == {"first_half": plus_share, "second_half": 1 - plus_share}


@pytest.fixture(scope="module")
def bundle_with_strangers(rows, tmp_path_factory):
    """train.mat with three extra rows absent from the genome (point mutations), with distinct labels."""
    sequences, labels = rows
    strangers = sequences[:3].copy()
    strangers[:, 500] = np.where(strangers[:, 500] == ord("A"), ord("C"), ord("A"))
    stranger_labels = np.zeros((3, 919), np.uint8)
    stranger_labels[:, 0] = 1
    directory = tmp_path_factory.mktemp("strangers")
    write_mat_v73(
        directory / "train.mat",
        "train",
        np.concatenate([sequences, strangers]),
        np.concatenate([labels, stranger_labels]),
    )
    return directory, strangers


def test_unlocated_rows_kept_at_original_length(bundle_with_strangers, genome, rows, tmp_path):
    directory, strangers = bundle_with_strangers
    manifest = prepare_chromatin(directory, tmp_path / "keep", genome=genome[0], chunk_rows=50)
    summary = manifest["splits"]["train"]["locate"]
    assert (summary["located"], summary["not_found"]) == (200, 3)
    assert summary["located_fraction"] == pytest.approx(200 / 203)
    assert manifest["splits"]["train"]["strand_pairs"]["layout"] == "none"  # 203 rows cannot pair up
    train = PreparedChromatin(tmp_path / "keep")["train"]
    assert len(train) == 203 and train.located.tolist() == [True] * 200 + [False] * 3
    for offset, stranger in enumerate(strangers):
        row = 200 + offset
        assert train.sequence(row) == train.central(row) == stranger.tobytes().decode()
        assert train.sequences[row].tobytes() == b"N" * 3500 + stranger.tobytes() + b"N" * 3500
        assert train.loci[row]["status"] == LocateStatus.NOT_FOUND
    assert train.labels[200:, 0].tolist() == [1, 1, 1]


def test_unlocated_rows_dropped(bundle_with_strangers, genome, rows, tmp_path):
    directory, _ = bundle_with_strangers
    manifest = prepare_chromatin(
        directory, tmp_path / "drop", genome=genome[0], context=2000, unlocated="drop", chunk_rows=50
    )
    entry = manifest["splits"]["train"]
    assert (entry["rows_in"], entry["rows"], entry["locate"]["not_found"]) == (203, 200, 3)
    train = PreparedChromatin(tmp_path / "drop")["train"]
    assert train.sequences.shape == (200, 2000) and train.located.all()
    np.testing.assert_array_equal(train.labels, rows[1])
    windows = genome[1]
    assert train.sequence(5) == windows[5][3000:5000]


def test_interrupted_preparation_resumes(bundle, genome, tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    prepare_chromatin(bundle, reference, genome=genome[0], chunk_rows=64)
    saves = []
    original_save = ChromatinJob._save

    def counting_save(job):
        original_save(job)
        saves.append(1)

    monkeypatch.setattr(ChromatinJob, "_save", counting_save)
    prepare_chromatin(bundle, tmp_path / "counted", genome=genome[0], chunk_rows=64)
    total = len(saves)
    starts = []
    original_chunks = DeepSEAMat.chunks
    monkeypatch.setattr(
        DeepSEAMat,
        "chunks",
        lambda mat, rows, start=0: (starts.append((mat.split, start)), original_chunks(mat, rows, start))[1],
    )
    for stop_after in range(3, total, 6):  # every stage: decoding, strand pairs, locating, writing windows
        out = tmp_path / f"resumed{stop_after}"
        saves.clear()

        def interrupted_save(job, stop_after=stop_after):
            counting_save(job)
            if len(saves) == stop_after:
                raise KeyboardInterrupt

        monkeypatch.setattr(ChromatinJob, "_save", interrupted_save)
        with pytest.raises(KeyboardInterrupt):
            prepare_chromatin(bundle, out, genome=genome[0], chunk_rows=64)
        assert not out.exists() and (tmp_path / f".{out.name}.partial" / "progress.json").exists()
        monkeypatch.setattr(ChromatinJob, "_save", original_save)
        starts.clear()
        prepare_chromatin(bundle, out, genome=genome[0], chunk_rows=64)
        for split in ("train", "valid", "test"):
            resumed, expected = arrays(out, split), arrays(reference, split)
            assert resumed.keys() == expected.keys()
            for name in expected:
                np.testing.assert_array_equal(resumed[name], expected[name])
        assert not (tmp_path / f".{out.name}.partial").exists()
        if stop_after == 3:  # stopped after the first chunk of train.mat: decoding resumes at row 64
            assert starts[0] == ("train", 64)


def test_changed_inputs_restart_the_interrupted_work(bundle, rows, tmp_path, monkeypatch, caplog):
    directory = tmp_path / "mat"
    directory.mkdir()
    write_mat_v5(directory / "valid.mat", "valid", *rows)
    original_save = ChromatinJob._save
    calls = []

    def interrupted_save(job):
        original_save(job)
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(ChromatinJob, "_save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        prepare_chromatin(directory, tmp_path / "out", chunk_rows=64)
    monkeypatch.setattr(ChromatinJob, "_save", original_save)
    changed = rows[0].copy()
    changed[:, :10] = ord("T")
    write_mat_v5(directory / "valid.mat", "valid", changed, rows[1])
    os.utime(directory / "valid.mat", ns=(1, 1))
    with caplog.at_level("INFO"):
        prepare_chromatin(directory, tmp_path / "out", chunk_rows=64)
    assert "discarding" in caplog.text
    np.testing.assert_array_equal(PreparedChromatin(tmp_path / "out")["valid"].sequences, changed)


# -- command line and errors --------------------------------------------------------------------


def test_cli_prepare(bundle, genome, tmp_path, capsys):
    out = tmp_path / "prepared"
    code = cli.main(
        [
            "chromatin",
            "prepare",
            "--mat-dir",
            str(bundle),
            "--out",
            str(out),
            "--genome",
            str(genome[0]),
            "--chunk-rows",
            "100",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "train: 200 rows of 200, strand pairs: halves, located 200 (100.00%)" in printed
    assert PreparedChromatin(out)["test"].sequences.shape == (200, 8000)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--context", "8000"], "needs a genome"),
        (["--genome", "GENOME", "--context", "8001"], "even number"),
        (["--genome", "GENOME", "--unlocated", "drop", "--context", "999"], "at least the input length"),
    ],
)
def test_cli_rejects_impossible_options(bundle, genome, tmp_path, capsys, extra, message):
    extra = [str(genome[0]) if item == "GENOME" else item for item in extra]
    code = cli.main(["chromatin", "prepare", "--mat-dir", str(bundle), "--out", str(tmp_path / "o"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_cli_input_errors_are_one_line(rows, bundle, tmp_path, capsys):
    sequences, labels = rows
    bad = tmp_path / "bad"
    bad.mkdir()
    write_mat_v5(bad / "test.mat", "test", sequences, labels[:, :900])
    cases = [
        (["--mat-dir", str(tmp_path / "missing")], "no such directory"),
        (["--mat-dir", str(tmp_path)], "no train.mat, valid.mat or test.mat"),
        (["--mat-dir", str(bad)], "900 label columns, DeepSEA has 919"),
        (["--mat-dir", str(bundle), "--genome", str(tmp_path / "nope.fa")], "no such"),
    ]
    for arguments, message in cases:
        code = cli.main(["chromatin", "prepare", *arguments, "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, err
    (tmp_path / "exists").mkdir()
    assert (
        cli.main(["chromatin", "prepare", "--mat-dir", str(bundle), "--out", str(tmp_path / "exists")]) == 2
    )
    assert "already exists" in capsys.readouterr().err


def test_sequences_outside_acgtn_in_the_genome(bundle, tmp_path, capsys):
    (tmp_path / "genome.fa").write_text(">chr1\nACGTXACGT\n")
    code = cli.main(
        [
            "chromatin",
            "prepare",
            "--mat-dir",
            str(bundle),
            "--out",
            str(tmp_path / "o"),
            "--genome",
            str(tmp_path / "genome.fa"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "invalid character 'X'" in err and err.count("\n") == 1


def test_prepared_reader_errors(tmp_path):
    with pytest.raises(InputError, match="not a prepared chromatin dataset"):
        PreparedChromatin(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="format 'something else'"):
        PreparedChromatin(tmp_path)


def test_unknown_split_and_policy(bundle, tmp_path):
    prepare_chromatin(bundle, tmp_path / "p", chunk_rows=500)
    with pytest.raises(UserError, match="has no 'training' split"):
        PreparedChromatin(tmp_path / "p")["training"]
    with pytest.raises(ConfigError, match="unlocated must be one of"):
        prepare_chromatin(bundle, tmp_path / "q", genome=tmp_path / "g.fa", unlocated="maybe")
