"""Inference: windows, batching, strand averaging (genolong/classifier/records.py, genolong/classifier/directory.py) and
`genolong predict-promoter` on real mouse promoters, including bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.classify import random_classifier, tiny_tokenizer
from helpers.tables import read_tsv

from genolong.classifier.directory import Classifier, StrandAveraged, TokenEncoder
from genolong.classifier.records import (
    RegionMerger,
    Skipped,
    Window,
    best_window_probabilities,
    group_by_record,
    iter_windows,
    predict_all,
    record_windows,
    score_windows,
    window_starts,
)
from genolong.cli.main import main
from genolong.dna.sequence import FastaRecord, read_fasta, reverse_complement, write_fasta
from genolong.dna.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer")


@pytest.fixture(scope="module")
def promoter_model(tokenizer_dir, tmp_path_factory):
    """A random-weight promoter classifier with a 251-bp window, like the Mouse_tata data."""
    out = tmp_path_factory.mktemp("model") / "promoter"
    return random_classifier(
        out,
        tokenizer_dir,
        task="promoter",
        window_bp=251,
        min_bp=251,
        label_names=["promoter"],
        threshold=0.5,
    )


@pytest.fixture(scope="module")
def mouse(real_data):
    """The first 12 real mouse TATA promoters (251 bp)."""
    return [
        r for _, r in zip(range(12), read_fasta(real_data / "promoters" / "Mouse_tata.fa"), strict=False)
    ]


# -- windows ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "length, window, stride, starts",
    [
        (100, 251, 50, [0]),  # shorter than the window: one input of its own length
        (251, 251, 50, [0]),
        (300, 251, 50, [0, 49]),  # 0 and the window flush with the end
        (351, 251, 50, [0, 50, 100]),  # the stride lands on the end
        (360, 251, 100, [0, 100, 109]),
        (1000, 100, 300, [0, 300, 600, 900]),
    ],
)
def test_window_starts(length, window, stride, starts):
    assert window_starts(length, window, stride) == starts
    assert all(s >= 0 and s + min(window, length) <= length for s in starts)


def test_iter_windows_cuts_records_and_skips_short_ones():
    records = [
        FastaRecord("a", "ACGT" * 30),
        FastaRecord("short", "ACG"),
        FastaRecord("b", "A" * 50 + "C" * 60),
    ]
    items = list(iter_windows(records, window=100, stride=40, min_length=10))
    assert items[0] == Window(0, "a", 120, 0, 100, ("ACGT" * 30)[:100], 2)
    assert items[1] == Window(0, "a", 120, 20, 120, ("ACGT" * 30)[20:], 2)
    assert items[2] == Skipped(1, "short", 3, "shorter than the model's minimum of 10 bp")
    assert [(w.start, w.end) for w in items[3:]] == [(0, 100), (10, 110)]
    assert items[4].sequence == ("A" * 50 + "C" * 60)[10:]


class LengthScorer:
    """Probability = GC fraction and length / 1000: easy to check by hand."""

    def __init__(self):
        self.batches = []

    def probabilities(self, sequences):
        self.batches.append(len(sequences))
        return np.array([[(s.count("G") + s.count("C")) / len(s), len(s) / 1000] for s in sequences])


def test_score_windows_keeps_order_and_batches():
    records = [FastaRecord(f"r{i}", "ACGGT" * (i + 1) * 10) for i in range(5)]
    records.insert(2, FastaRecord("tiny", "AC"))
    items = list(iter_windows(records, window=120, stride=60, min_length=5))
    scorer = LengthScorer()
    scored = list(score_windows(items, scorer, batch_size=3))
    assert [item for item, _ in scored] == items
    assert all(b <= 3 for b in scorer.batches) and sum(scorer.batches) == len(items) - 1
    for item, probabilities in scored:
        if isinstance(item, Skipped):
            assert probabilities is None
        else:
            assert probabilities[1] == pytest.approx(len(item.sequence) / 1000)
    groups = [(first.name, len(list(pairs))) for first, pairs in group_by_record(scored)]
    assert groups == [(r.name, n) for r, n in zip(records, [1, 1, 1, 2, 3, 4], strict=True)]


def test_held_out_records_score_their_best_window():
    """300 bp, GC only in its last 100 bp: windows of 251 at 0 and 49 (half-window stride), the
    second one the GC-richer; a 40-bp record is one input of its own length."""
    sequences = ["A" * 200 + "G" * 100, "ACGT" * 10]
    windows, record = record_windows(sequences, 251, 125)
    assert windows == [sequences[0][:251], sequences[0][49:], sequences[1]] and record.tolist() == [0, 0, 1]
    scorer = LengthScorer()
    np.testing.assert_allclose(
        best_window_probabilities(scorer, sequences, batch_size=2, window=251),
        [[100 / 251, 0.251], [0.5, 0.04]],
    )
    assert scorer.batches == [2, 1]


def test_scanning_a_long_record_streams():
    """30,000 windows of 1 kb (30 MB if held) go through in a few MB."""
    import tracemalloc

    record = FastaRecord("chr", "ACGTTGCAAC" * 30_000)  # 300 kbp
    tracemalloc.start()
    windows = 0
    for _, pairs in group_by_record(
        score_windows(iter_windows([record], 1000, 10, 1000), LengthScorer(), 64)
    ):
        merger = RegionMerger(0.5)
        for window, probabilities in pairs:
            windows += 1
            merger.add(window.start, window.end, probabilities[0])
        assert merger.close() == [(0, 300_000, 0.5)]  # every window is 50% GC
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert windows == 29_901 and peak < 5e6


def test_region_merger_by_hand():
    windows = [
        (0, 100, 0.9),
        (50, 150, 0.2),
        (120, 220, 0.7),
        (150, 250, 0.8),
        (300, 400, 0.95),
        (400, 500, 0.6),
    ]
    merger = RegionMerger(0.5)
    closed = [region for window in windows for region in merger.add(*window)] + merger.close()
    assert closed == [(0, 100, 0.9), (120, 250, 0.8), (300, 500, 0.95)]  # touching windows merge
    strict = RegionMerger(0.99)
    assert [region for window in windows for region in strict.add(*window)] + strict.close() == []


# -- encoding and the classifier --------------------------------------------------------------
def test_token_encoder_adds_specials_pads_and_keeps_the_centre(tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    encoder = TokenEncoder(tokenizer, max_len=12)
    long, short = "ACGTTGCA" * 20, "acgtn"
    batch = encoder([long, short])
    ids = tokenizer.backend_tokenizer.encode(long, add_special_tokens=False).ids
    start = (len(ids) - 10) // 2
    assert batch["input_ids"][0].tolist() == [
        tokenizer.cls_token_id,
        *ids[start : start + 10],
        tokenizer.sep_token_id,
    ]
    short_ids = tokenizer.backend_tokenizer.encode("ACGTN", add_special_tokens=False).ids
    n = len(short_ids) + 2
    assert batch["input_ids"][1, :n].tolist() == [tokenizer.cls_token_id, *short_ids, tokenizer.sep_token_id]
    assert (batch["input_ids"][1, n:] == tokenizer.pad_token_id).all()
    assert batch["attention_mask"].sum(1).tolist() == [12, n]


def test_token_encoder_without_max_len_keeps_every_token(tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    long = "ACGTTGCA" * 40
    ids = tokenizer.backend_tokenizer.encode(long, add_special_tokens=False).ids
    batch = TokenEncoder(tokenizer, max_len=None)([long, "ACG"])
    assert batch["input_ids"][0].tolist() == [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]
    assert batch["attention_mask"].sum(1).tolist()[0] == len(ids) + 2


def test_probabilities_do_not_depend_on_batch_composition(promoter_model, mouse):
    classifier = Classifier.load(promoter_model, device="cpu")
    sequences = [r.sequence[: 120 + 10 * i] for i, r in enumerate(mouse)]  # mixed lengths: padding differs
    together = classifier.probabilities(sequences)
    alone = np.concatenate([classifier.probabilities([s]) for s in sequences])
    np.testing.assert_allclose(together, alone, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        predict_all(classifier, sequences, batch_size=5), together, rtol=1e-5, atol=1e-6
    )
    assert together.shape == (12, 1) and ((together > 0) & (together < 1)).all()


def test_strand_averaging_is_strand_invariant(promoter_model, mouse):
    classifier = Classifier.load(promoter_model, device="cpu")
    both = StrandAveraged(classifier)
    forward = [r.sequence for r in mouse]
    reverse = [reverse_complement(s) for s in forward]
    np.testing.assert_allclose(both.probabilities(forward), both.probabilities(reverse), rtol=1e-5, atol=1e-6)
    expected = (classifier.probabilities(forward) + classifier.probabilities(reverse)) / 2
    np.testing.assert_allclose(both.probabilities(forward), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(classifier.probabilities(forward), classifier.probabilities(reverse))


def test_classifier_round_trip(promoter_model, tmp_path, mouse):
    classifier = Classifier.load(promoter_model, task="promoter", device="cpu")
    classifier.save(tmp_path / "copy")
    copy = Classifier.load(tmp_path / "copy", device="cpu")
    assert copy.info == classifier.info
    sequences = [r.sequence for r in mouse[:3]]
    assert torch.equal(
        torch.from_numpy(copy.probabilities(sequences)), torch.from_numpy(classifier.probabilities(sequences))
    )


def test_predict_promoter_rows_windows_and_bed(promoter_model, mouse, tmp_path, capsys):
    long = "".join(r.sequence for r in mouse[:3])  # 753 bp: scanned in windows
    records = [(r.name, r.sequence) for r in mouse[3:6]] + [("long", long), ("short", "ACGT" * 10)]
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, records)
    out, windows, bed = tmp_path / "preds.tsv", tmp_path / "windows.tsv", tmp_path / "regions.bed"
    code = main(
        [
            "predict-promoter",
            str(fasta),
            "--model",
            str(promoter_model),
            "--out",
            str(out),
            "--windows",
            str(windows),
            "--bed",
            str(bed),
            "--stride",
            "100",
            "--batch-size",
            "3",
        ]
    )
    assert code == 0
    assert "5 records, 10 windows scored" in capsys.readouterr().err
    rows = read_tsv(out)
    assert [(r["record"], r["id"]) for r in rows] == [(str(i + 1), name) for i, (name, _) in enumerate(records)]
    classifier = Classifier.load(promoter_model, device="cpu")
    expected = classifier.probabilities([s for _, s in records[:3]])[:, 0]
    for row, p in zip(rows[:3], expected, strict=True):
        assert (row["length"], row["windows"], row["error"]) == ("251", "1", "")
        assert float(row["probability"]) == pytest.approx(p, abs=6e-5)
        assert row["label"] == str(int(float(row["probability"]) >= 0.5))
    window_rows = [r for r in read_tsv(windows) if r["id"] == "long"]
    assert [(int(r["start"]), int(r["end"])) for r in window_rows] == [
        (s, s + 251) for s in (0, 100, 200, 300, 400, 500, 502)
    ]
    window_probs = classifier.probabilities([long[s : s + 251] for s in (0, 100, 200, 300, 400, 500, 502)])[
        :, 0
    ]
    np.testing.assert_allclose([float(r["probability"]) for r in window_rows], window_probs, atol=6e-5)
    assert float(rows[3]["probability"]) == pytest.approx(window_probs.max(), abs=6e-5)
    held_out = best_window_probabilities(classifier, [s for _, s in records[:4]], 3, 251, stride=100)[:, 0]
    np.testing.assert_allclose([float(r["probability"]) for r in rows[:4]], held_out, atol=6e-5)
    assert rows[4]["error"] == "shorter than the model's minimum of 251 bp" and rows[4]["probability"] == ""
    expected_bed = []
    for name, start, end, score in [
        (r["id"], int(r["start"]), int(r["end"]), float(r["probability"])) for r in read_tsv(windows)
    ]:
        if score >= 0.5:
            if expected_bed and expected_bed[-1][0] == name and start <= expected_bed[-1][2]:
                expected_bed[-1][2] = end
            else:
                expected_bed.append([name, start, end])
    assert [line.split("\t")[:3] for line in bed.read_text().splitlines()] == [
        [n, str(s), str(e)] for n, s, e in expected_bed
    ]


def test_predict_promoter_to_stdout_with_rc(promoter_model, mouse, tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, [(r.name, r.sequence) for r in mouse[:2]])
    assert main(["predict-promoter", str(fasta), "--model", str(promoter_model), "--rc"]) == 0
    comment, _, *lines = capsys.readouterr().out.splitlines()
    threshold = Classifier.load(promoter_model, device="cpu").info.threshold
    assert comment.startswith(f"# model {promoter_model}; threshold {threshold:.4f}; trained on ")
    assert lines[0].split("\t") == ["record", "id", "length", "windows", "probability", "label", "error"]
    both = StrandAveraged(Classifier.load(promoter_model, device="cpu")).probabilities(
        [r.sequence for r in mouse[:2]]
    )
    assert [float(line.split("\t")[4]) for line in lines[1:]] == pytest.approx(both[:, 0], abs=6e-5)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "empty file: no FASTA records"),
        (">ok\n" + "ACGT" * 70 + "\n>bad\nACGTXACGT\n", "in.fa:4 (record 'bad'): invalid character 'X'"),
        ("ACGT\n", "expected a FASTA header line"),
    ],
)
def test_bad_fasta_stops_with_one_line_and_no_output(promoter_model, tmp_path, capsys, content, message):
    fasta = tmp_path / "in.fa"
    fasta.write_text(content)
    out = tmp_path / "preds.tsv"
    code = main(
        [
            "predict-promoter",
            str(fasta),
            "--model",
            str(promoter_model),
            "--out",
            str(out),
            "--bed",
            str(tmp_path / "r.bed"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.fa"]  # nothing half-written


def test_models_that_are_not_promoter_models(tokenizer_dir, tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, [("a", "ACGT" * 70)])
    chromatin = random_classifier(
        tmp_path / "chromatin",
        tokenizer_dir,
        task="chromatin",
        window_bp=1000,
        min_bp=1000,
        label_names=["a", "b"],
    )
    (tmp_path / "pretrained").mkdir()
    (tmp_path / "pretrained" / "config.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "genolong_task.json").write_text("{not json")
    cases = {
        chromatin: "is a chromatin model, not a promoter model",
        tmp_path / "pretrained": "is a pretrained model, not a fine-tuned classifier",
        tmp_path / "empty": "is not a genolong model directory",
        tmp_path / "broken": "genolong_task.json: not a valid task description",
        tmp_path / "nowhere": "no such model directory",
    }
    for model, message in cases.items():
        code = main(["predict-promoter", str(fasta), "--model", str(model), "--out", str(tmp_path / "p.tsv")])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (model, err)
    assert not (tmp_path / "p.tsv").exists()


def test_option_errors(promoter_model, tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, [("a", "ACGT" * 70)])
    for option in (["--stride", "-5"], ["--batch-size", "0"]):
        code = main(["predict-promoter", str(fasta), "--model", str(promoter_model), *option])
        err = capsys.readouterr().err
        assert code == 2 and "must be a positive integer" in err and len(err.strip().splitlines()) == 1


@pytest.mark.gpu
def test_gpu_probabilities_match_cpu(promoter_model, mouse):
    sequences = [r.sequence for r in mouse]
    cpu = Classifier.load(promoter_model, device="cpu").probabilities(sequences)
    gpu = Classifier.load(promoter_model)  # auto: the GPU
    assert gpu.device.type == "cuda"
    np.testing.assert_allclose(gpu.probabilities(sequences), cpu, atol=1e-4)
