"""Held-out-source promoter datasets (`genolong promoter prepare-sources`), their per-pair metrics,
calibration measured on held-out data, and random crops."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.classify import micro_config

from genolong.classifier.directory import Classifier
from genolong.cli.main import main
from genolong.core.errors import ConfigError
from genolong.datasets.promoter import load_split
from genolong.dna.sequence import write_fasta
from genolong.evaluation.calibration import BackwardsRanking, fit_platt, fold_into_head
from genolong.evaluation.cross_source import pair_metrics
from genolong.evaluation.metrics import expected_calibration_error
from genolong.prep.source_split import (
    SOURCE_SPLITS,
    SourceSplitConfig,
    build_source_split_dataset,
    load_source_split_config,
)
from genolong.tasks.task import report_summary
from genolong.training.finetune import random_crop, run_finetune


def random_sequences(n: int, length: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), size=length)) for _ in range(n)]


def assert_disjoint(data_dir) -> dict[str, list]:
    splits = {name: load_split(data_dir, name) for name in SOURCE_SPLITS}
    seen: dict[str, str] = {}
    for name, records in splits.items():
        for record in records:
            assert record.sequence not in seen, f"{record.id} in {name} and {seen[record.sequence]}"
            seen[record.sequence] = name
    return splits


@pytest.fixture
def three_sources(tmp_path):
    """Sources a (train), b (valid), c (test); one promoter of a is also in c, one is in a twice."""
    a, b, c = (random_sequences(40, 60, seed) for seed in (1, 2, 3))
    shared, negatives = a[0], random_sequences(30, 60, 4)
    write_fasta(tmp_path / "a.fa", [(f"a{i}", s) for i, s in enumerate(a + [a[1]])])
    (tmp_path / "b.txt").write_text("\n".join(b) + "\n")
    write_fasta(tmp_path / "c.fa", [(f"c{i}", s) for i, s in enumerate(c + [shared])])
    write_fasta(tmp_path / "neg.fa", [(f"n{i}", s) for i, s in enumerate(negatives)])
    write_fasta(tmp_path / "genome.fa", [("chr1", random_sequences(1, 3000, 5)[0])])
    spec = {
        "groups": [
            {"name": "a", "role": "train", "promoters": ["a.fa"], "non_promoters": ["neg.fa"]},
            {"name": "b", "role": "valid", "promoters": ["b.txt"]},
            {
                "name": "c",
                "role": "test",
                "promoters": ["c.fa"],
                "genome": "genome.fa",
                "genome_windows": 20,
                "genome_window_bp": 60,
            },
        ],
        "random_test_fraction": 0.25,
        "seed": 7,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path, shared


def test_source_split_never_shares_a_sequence(tmp_path, three_sources):
    spec, shared = three_sources
    manifest = build_source_split_dataset(load_source_split_config(spec), tmp_path / "data")
    splits = assert_disjoint(tmp_path / "data")
    assert manifest["deduplication"]["duplicate"] == 2  # a's repeat, and the copy of a held out in c
    assert shared in {r.sequence for r in splits["test"]}  # a shared sequence stays held out
    sources = {name: {r.source for r in records} for name, records in splits.items()}
    assert sources["valid"] == {"b/b", "b/b|substitution", "b/b|shuffle"}
    assert sources["test"] == {"c/c", "c/c|substitution", "c/c|shuffle", "c/genome"}
    assert sources["train"] == sources["random_test"] == {"a/a", "a/neg", "a/a|substitution", "a/a|shuffle"}
    counts = manifest["counts_by_source"]
    assert counts["random_test"]["a/a"] == round(0.25 * 40) and counts["random_test"]["a/neg"] == round(
        0.25 * 30
    )
    for name, records in splits.items():  # one derived negative of each kind per promoter of the split
        promoters = sum(r.label for r in records)
        assert sum(r.source.endswith("|shuffle") for r in records) == promoters, name
    assert manifest["split"]["roles"] == {"a": "train", "b": "valid", "c": "test"}


def test_source_split_is_seeded(tmp_path, three_sources):
    spec, _ = three_sources
    for out in ("one", "two"):
        build_source_split_dataset(load_source_split_config(spec), tmp_path / out)
    assert (tmp_path / "one" / "train.tsv").read_bytes() == (tmp_path / "two" / "train.tsv").read_bytes()


def test_source_split_config_errors():
    with pytest.raises(ConfigError, match="at least one train and one test"):
        SourceSplitConfig(groups=[{"name": "a", "role": "train", "promoters": ["x.fa"]}])
    with pytest.raises(ConfigError, match="role"):
        SourceSplitConfig(groups=[{"name": "a", "role": "holdout", "promoters": ["x.fa"]}])
    with pytest.raises(ConfigError, match="genome_windows"):
        SourceSplitConfig(groups=[{"name": "a", "role": "test", "genome": "g.fa"}])


def test_cli_prepare_sources_bad_spec_is_one_line_exit_2(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "groups: [{name: a, role: train, promoters: [missing.fa]}, {name: b, role: test, promoters: [missing.fa]}]\n"
    )
    assert main(["promoter", "prepare-sources", "--spec", str(spec), "--out", str(tmp_path / "out")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_default_spec_on_real_data_never_shares_a_sequence(tmp_path, real_data):
    out = tmp_path / "data"
    assert main(["promoter", "prepare-sources", "--root", str(real_data), "--out", str(out)]) == 0
    splits = assert_disjoint(out)
    groups = {name: {r.source.split("/")[0] for r in records} for name, records in splits.items()}
    assert groups["valid"] == {"mouse_dbtss", "yeast_background"}
    assert groups["test"] == {"arabidopsis_epdnew"}
    assert groups["train"] == groups["random_test"] == {"mouse_epdnew", "worm_background"}
    assert {len(r.sequence) for r in splits["train"]} == {251, 300}
    for split in ("train", "valid", "test"):
        derived = {r.source.rsplit("|", 1)[1] for r in splits[split] if "|" in r.source}
        assert derived == {"substitution", "shuffle"}


def test_reverse_spec_on_real_data_never_shares_a_sequence(tmp_path, real_data):
    """``plant_to_mouse``, the other direction of the README's cross-source table."""
    build_source_split_dataset(load_source_split_config("plant_to_mouse", real_data), tmp_path / "data")
    splits = assert_disjoint(tmp_path / "data")
    groups = {name: {r.source.split("/")[0] for r in records} for name, records in splits.items()}
    assert groups["test"] == {"mouse_epdnew"}
    assert groups["train"] == groups["random_test"] == {"arabidopsis_epdnew", "worm_background"}


def test_dbtss_spec_on_real_data_tests_the_default_validation_source(tmp_path, real_data):
    """``mouse_to_dbtss``: the default model's training sources, with mouse DBTSS as a test source."""
    build_source_split_dataset(load_source_split_config("mouse_to_dbtss", real_data), tmp_path / "data")
    splits = assert_disjoint(tmp_path / "data")
    groups = {name: {r.source.split("/")[0] for r in records} for name, records in splits.items()}
    assert groups["test"] == {"mouse_dbtss", "yeast_background"}
    assert groups["valid"] == {"arabidopsis_epdnew"}
    assert groups["train"] == groups["random_test"] == {"mouse_epdnew", "worm_background"}
    derived = {r.source.rsplit("|", 1)[1] for r in splits["test"] if "|" in r.source}
    assert derived == {"substitution", "shuffle"}


def test_pair_metrics_pairs_derived_negatives_with_their_own_promoters():
    labels = [1, 1, 0, 0, 0, 1, 0]
    sources = ["p", "p", "p|shuffle", "real", "real", "q", "q|shuffle"]
    probabilities = [0.9, 0.8, 0.85, 0.1, 0.2, 0.7, 0.75]
    metrics = pair_metrics(labels, probabilities, 0.5, sources)
    assert set(metrics) == {"all", "p vs p|shuffle", "p vs real", "q vs q|shuffle", "q vs real"}
    assert metrics["p vs real"]["auroc"] == 1.0 and metrics["p vs real"]["f1"] == 1.0
    assert metrics["p vs p|shuffle"]["auroc"] == 0.5  # 0.85 sits between the promoters' 0.9 and 0.8
    assert metrics["q vs q|shuffle"]["auroc"] == 0.0
    assert metrics["all"]["n"] == 7


def test_expected_calibration_error_hand_checked():
    # bin [0.2, 0.3): mean probability 0.2, 1 of 2 positive -> |0.5 - 0.2|; bin [0.9, 1): |1 - 0.9|
    assert expected_calibration_error([0, 1, 1, 1], [0.2, 0.2, 0.9, 0.9]) == pytest.approx(
        0.5 * 0.3 + 0.5 * 0.1
    )
    assert expected_calibration_error([0, 1], [0.0, 1.0]) == 0.0


def test_platt_scaling_folds_into_the_head_and_is_measured_on_other_data():
    rng = np.random.default_rng(0)
    true_logits = rng.normal(0, 2, size=4000)
    labels = (rng.random(4000) < 1 / (1 + np.exp(-true_logits))).astype(int)
    overconfident = 3 * true_logits - 1  # what a model trained elsewhere might output
    fit, held_out = slice(0, 2000), slice(2000, None)
    scale, offset = fit_platt(overconfident[fit], labels[fit])
    assert scale == pytest.approx(1 / 3, rel=0.15) and offset == pytest.approx(1 / 3, abs=0.2)
    with pytest.raises(BackwardsRanking, match="ranks validation data backwards"):
        fit_platt(-overconfident[fit], labels[fit])

    head = torch.nn.Linear(1, 1)
    with torch.no_grad():
        head.weight.fill_(3.0), head.bias.fill_(-1.0)
    fold_into_head(head, scale, offset)
    hidden = torch.tensor(true_logits[held_out], dtype=torch.float32).reshape(-1, 1)
    calibrated = torch.sigmoid(head(hidden)).detach().numpy().ravel()
    before = 1 / (1 + np.exp(-overconfident[held_out]))
    np.testing.assert_allclose(
        calibrated, 1 / (1 + np.exp(-(scale * overconfident[held_out] + offset))), rtol=1e-4
    )
    assert expected_calibration_error(labels[held_out], calibrated) < 0.5 * expected_calibration_error(
        labels[held_out], before
    )


def test_random_crop_lengths_and_seed():
    sequence = "ACGT" * 75  # 300 bp
    crops = [random_crop(sequence, 251, np.random.default_rng([3, position])) for position in range(200)]
    assert all(251 <= len(c) <= 300 and c in sequence for c in crops)
    assert len({len(c) for c in crops}) > 20
    assert crops[5] == random_crop(sequence, 251, np.random.default_rng([3, 5]))
    assert random_crop("ACGT", 251, np.random.default_rng(0)) == "ACGT"


def test_finetune_by_source_crops_calibrates_and_reports_pairs(tmp_path, three_sources):
    spec, _ = three_sources
    build_source_split_dataset(load_source_split_config(spec), tmp_path / "data")
    config = micro_config("promoter", crop_min_bp=50, calibrate=True)
    report = run_finetune(tmp_path / "data", tmp_path / "run", config, show_progress=False)
    assert (
        set(report["by_source"])
        == set(report["kmer_baseline"]["by_source"])
        == {"test", "valid", "random_test"}
    )
    assert "c/c vs c/genome" in report["by_source"]["test"] and "ece" in report["by_source"]["test"]["all"]
    assert report["calibration"]["scale"] > 0 and report["min_bp"] == 50 and report["window_bp"] == 60
    classifier = Classifier.load(tmp_path / "run" / "model", device="cpu")
    assert classifier.info.min_bp == 50
    valid = load_split(tmp_path / "data", "valid")  # the threshold was chosen on the calibrated model
    probabilities = classifier.probabilities([r.sequence for r in valid])[:, 0]
    assert report["valid"]["auroc"] == pytest.approx(
        pair_metrics([r.label for r in valid], probabilities, 0.5, [r.source for r in valid])["all"]["auroc"],
        abs=1e-4,
    )
    assert "| test | c/c vs c/genome |" in report_summary(report) and "c/c vs c/c\\|substitution" in report_summary(report)


def test_the_window_is_the_longest_training_input_not_a_longer_held_out_one(tmp_path, three_sources):
    """A model never sees positions beyond its training inputs: held-out records longer than
    them are scanned in windows of the training length, not scored whole."""
    from genolong.tasks.promoter import PromoterTask

    spec_path, _ = three_sources
    spec = json.loads(spec_path.read_text())
    write_fasta(tmp_path / "c.fa", [(f"c{i}", s) for i, s in enumerate(random_sequences(40, 90, 3))])
    spec_path.write_text(json.dumps(spec))
    build_source_split_dataset(load_source_split_config(spec_path), tmp_path / "data")
    assert json.loads((tmp_path / "data" / "manifest.json").read_text())["sequence_length"] == 90
    data = PromoterTask().load_data(tmp_path / "data")
    assert data.window_bp == 60 and data.min_bp == 60
