"""``genolong task finetune``: the loss, outputs and report of each problem type, the k-mer model
fitted on the training split and its stack with the network (saved in the classifier)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.task_finetune import micro_preset, motif_rows

from genolong.classifier.directory import Classifier
from genolong.cli.main import main


@pytest.fixture(scope="module")
def three_classes(tmp_path_factory):
    """A 3-class task from a CSV: 60-bp sequences with their class's motif, 180 / 30 / 30 rows."""
    root = tmp_path_factory.mktemp("three")
    rows = motif_rows(240, 60, seed=5)
    (root / "rows.csv").write_text("sequence,label\n" + "".join(f"{s},{['a', 'b', 'c'][y]}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(root / "rows.csv"), "--fractions", "0.75,0.125,0.125",
                 "--out", str(root / "data")]) == 0
    return root


@pytest.mark.slow
def test_a_three_class_task_trains_a_softmax_and_reports_network_kmer_and_stack(three_classes, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["task", "finetune", "--data", str(three_classes / "data"), "--out", str(out),
                 "--config", str(micro_preset(tmp_path / "micro.yaml"))]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["problem_type"] == "multiclass" and report["monitor"]["metric"] == "val/score"
    assert {"network", "kmer_baseline", "stack"} <= set(report)
    assert report["saved_model"] == {"k-mer model": "k-mer model", "stack": "network + k-mer stack"}[
        "".join(report["stack"]["kept"])]  # a micro network of 20 steps never wins alone
    assert report["kmer_baseline"]["model"] == "multinomial logistic regression"
    assert report["kmer_baseline"]["test"]["accuracy"] >= 0.8  # chance: 1/3; the motifs are 8-mers
    assert report["stack"]["test"]["accuracy"] >= 0.8
    assert "k-mer alone test" in printed and "stack test" in printed
    classifier = Classifier.load(out / "model", task="labelled", device="cpu")
    assert classifier.info.label_names == ["a", "b", "c"]
    probabilities = classifier.probabilities([s for s, _ in motif_rows(6, 60, seed=9)])
    assert probabilities.shape == (6, 3) and np.allclose(probabilities.sum(axis=1), 1, atol=1e-5)
    table = tmp_path / "predictions.tsv"
    assert main(["task", "predict", str(three_classes / "rows.csv"), "--model", str(out / "model"),
                 "--out", str(table)]) == 0
    lines = table.read_text().splitlines()
    assert lines[0] == "record\tid\tlength\twindows\ta\tb\tc\terror" and len(lines) == 241
    assert lines[1].startswith("1\trow1\t")


@pytest.mark.slow
def test_a_binary_stack_is_folded_into_the_saved_classifier(tmp_path):
    rows = [(s, int(y == 0)) for s, y in motif_rows(300, 60, seed=6)]
    (tmp_path / "rows.tsv").write_text("sequence\tmotif\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    assert main(["task", "prepare", "--table", str(tmp_path / "rows.tsv"), "--out", str(tmp_path / "data")]) == 0
    out = tmp_path / "run"
    assert main(["task", "finetune", "--data", str(tmp_path / "data"), "--out", str(out),
                 "--config", str(micro_preset(tmp_path / "micro.yaml"))]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["problem_type"] == "binary" and report["saved_model"] in ("k-mer model", "network + k-mer stack")
    assert report["kmer_baseline"]["test"]["auroc"] >= 0.9  # chance 0.5
    assert report["test"]["auroc"] >= report["kmer_baseline"]["test"]["auroc"] - 0.02
    classifier = Classifier.load(out / "model", task="labelled", device="cpu")
    assert classifier.kmer is not None and classifier.info.threshold == report["threshold"]
