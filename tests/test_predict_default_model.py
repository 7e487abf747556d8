"""The promoter model shipped in genolong/resources/models/promoter/: small, documented, and its
recorded test metrics reproduce on the real data it was trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genolong.classifier import TASK_FILE, Classifier, default_promoter_model
from genolong.cli import main
from genolong.metrics import promoter_metrics
from genolong.predict import predict_all
from genolong.sequence import read_fasta, write_fasta

MODEL = default_promoter_model()
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_default_promoter_model.py"


def test_shipped_model_is_small_and_documented():
    files = {path.name: path.stat().st_size for path in MODEL.iterdir()}
    assert {TASK_FILE, "config.json", "model.safetensors", "tokenizer.json", "README.md"} <= set(files)
    assert sum(files.values()) <= 20e6
    report = json.loads((MODEL / TASK_FILE).read_text())["provenance"]["report"]
    readme = (MODEL / "README.md").read_text()
    assert "python scripts/train_default_promoter_model.py" in readme
    assert (
        f"{report['test']['f1']:>9.4f}" in readme
        and f"{report['kmer_baseline']['test']['f1']:>9.4f}" in readme
    )


def test_recorded_test_metrics_reproduce(shared_data, tmp_path):
    import importlib.util

    from genolong.data_prep.promoter_dataset import load_split

    spec = importlib.util.spec_from_file_location("train_default", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.build_dataset(shared_data / "promoters", "real", tmp_path / "data")
    classifier = Classifier.load(MODEL, task="promoter", device="cpu")
    report = classifier.info.provenance["report"]
    test = load_split(tmp_path / "data", "test")
    probabilities = predict_all(classifier, [r.sequence for r in test], batch_size=64)[:, 0]
    metrics = promoter_metrics([r.label for r in test], probabilities, classifier.info.threshold)
    assert metrics["n"] == report["test"]["n"] and metrics["n_positive"] == report["test"]["n_positive"]
    assert metrics["auroc"] == pytest.approx(report["test"]["auroc"], abs=1e-4)
    assert metrics["f1"] == pytest.approx(report["test"]["f1"], abs=5e-3)  # one flipped call moves F1 ~0.004


def test_predict_promoter_works_without_a_model_argument(shared_data, tmp_path, capsys):
    records = [
        r for _, r in zip(range(4), read_fasta(shared_data / "promoters" / "Mouse_tata.fa"), strict=False)
    ]
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, records)
    assert main(["predict-promoter", str(fasta), "--out", str(tmp_path / "p.tsv")]) == 0
    rows = (tmp_path / "p.tsv").read_text().splitlines()[1:]
    assert [row.split("\t")[0] for row in rows] == [r.name for r in records]
    assert "4 records, 4 windows scored" in capsys.readouterr().err
