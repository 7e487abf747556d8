"""The promoter model shipped in genolong/resources/models/promoter/: small, documented, and its
recorded test metrics reproduce on the real data it was trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genolong.classifier.directory import TASK_FILE, Classifier, default_promoter_model
from genolong.classifier.records import predict_all
from genolong.cli.main import main
from genolong.dna.sequence import read_fasta, write_fasta

MODEL = default_promoter_model()
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train_default_promoter_model.py"


def test_shipped_model_is_small_and_documented():
    files = {path.name: path.stat().st_size for path in MODEL.iterdir()}
    assert {TASK_FILE, "config.json", "model.safetensors", "tokenizer.json", "kmer_component.npz", "README.md"} <= set(
        files
    )
    assert sum(files.values()) <= 2e6
    info = json.loads((MODEL / TASK_FILE).read_text())
    report = info["provenance"]["report"]
    readme = (MODEL / "README.md").read_text()
    assert "python scripts/train_default_promoter_model.py" in readme
    assert f"{report['threshold']:.4f}" in readme and info["provenance"]["trained_on"] in readme
    assert (
        f"{report['test']['f1']:>9.4f}" in readme
        and f"{report['kmer_baseline']['test']['f1']:>9.4f}" in readme
    )
    pairs = report["by_source"]["test"]
    assert "arabidopsis_epdnew/Arabidopsis_tata vs arabidopsis_epdnew/Arabidopsis_non_prom" in pairs
    for pair, metrics in pairs.items():  # every held-out pair is in the README's table
        name = pair.replace("|", "\\|")
        assert f"| test | {name} | {metrics['n']:,} | {metrics['f1']:.3f} | {metrics['auroc']:.3f} |" in readme


@pytest.mark.slow  # rebuilds the full held-out-source dataset from ../shared/data
def test_recorded_metrics_reproduce(shared_data, tmp_path):
    """The script's dataset, scored by the shipped model, gives the recorded random-split metrics
    and the recorded metrics of a held-out source pair, ECE (measured on data calibration never saw)
    included."""
    import importlib.util

    from genolong.datasets.promoter import load_split
    from genolong.evaluation.cross_source import pair_metrics

    spec = importlib.util.spec_from_file_location("train_default", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.build_dataset(shared_data, tmp_path / "data")
    classifier = Classifier.load(MODEL, task="promoter", device="cpu")
    report = classifier.info.provenance["report"]
    pair = "arabidopsis_epdnew/Arabidopsis_tata vs arabidopsis_epdnew/Arabidopsis_non_prom"
    for split, name in (("random_test", "all"), ("test", pair)):
        records = load_split(tmp_path / "data", split)
        if name != "all":
            records = [r for r in records if r.source in name.split(" vs ")]
        probabilities = predict_all(classifier, [r.sequence for r in records], batch_size=64)[:, 0]
        labels, sources = [r.label for r in records], [r.source for r in records]
        metrics = pair_metrics(labels, probabilities, classifier.info.threshold, sources)["all"]
        recorded = report["by_source"][split][name]
        assert metrics["n"] == recorded["n"] and metrics["n_positive"] == recorded["n_positive"]
        assert metrics["auroc"] == pytest.approx(recorded["auroc"], abs=1e-4)
        assert metrics["ece"] == pytest.approx(recorded["ece"], abs=1e-3)
        assert metrics["f1"] == pytest.approx(recorded["f1"], abs=5e-3)  # a flipped call moves F1 a little
    assert set(report["calibration"]) >= {"network_weight", "expert_weights", "offset"}
    assert classifier.kmer is not None  # the shipped model is the network + k-mer experts ensemble


def test_predict_promoter_works_without_a_model_argument(real_data, tmp_path, capsys):
    records = [
        r for _, r in zip(range(4), read_fasta(real_data / "promoters" / "Mouse_tata.fa"), strict=False)
    ]
    fasta = tmp_path / "in.fa"
    write_fasta(fasta, records)
    assert main(["predict-promoter", str(fasta), "--out", str(tmp_path / "p.tsv")]) == 0
    comment, _, _, *rows = (tmp_path / "p.tsv").read_text().splitlines()
    assert [row.split("\t")[:2] for row in rows] == [[str(i + 1), r.name] for i, r in enumerate(records)]
    info = Classifier.load(MODEL, device="cpu").info
    assert comment == f"# model {MODEL} (default); threshold {info.threshold:.4f}; trained on {info.provenance['trained_on']}"
    assert "4 records, 4 windows scored" in capsys.readouterr().err


def test_help_names_the_default_models_threshold_and_training_data(capsys):
    info = Classifier.load(MODEL, device="cpu").info
    assert main(["predict-promoter", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps lines, at hyphens too
    assert f"threshold {info.threshold:.4f}; trained on {info.provenance['trained_on']}" in text
    assert f"scores records of {info.min_bp} bp or more" in text
