"""GENA-LM's DeepSEA CSV (8-kb sequences, 919 labels, no header) as a 919-label task end to end:
``task prepare`` -> ``task finetune`` -> the test report's per-profile AUC table ``aucs.csv``,
which ``notebooks/per_profile_auc.ipynb`` reads (profile names and TF/DHS/HM classes in DeepSEA's
column order). Fast: 40 rows cut to their central 300 bp; slow: the real file whole."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest
from helpers.notebooks import run_auc_notebook
from helpers.task_finetune import micro_preset

from genolong.cli.main import main
from genolong.evaluation.chromatin import read_auc_table
from genolong.evaluation.profiles import CLASS_COLUMNS, chromatin_profiles

GENA_CSV = "chromatin/gena_lm_deepsea_test.dataset.csv.gz"


def gena_rows(path) -> list[list[str]]:
    with gzip.open(path, "rt", newline="") as handle:
        return list(csv.reader(handle))


def run_chain(table, tmp_path, prepare: list[str], finetune: list[str], **train) -> tuple[dict, np.ndarray]:
    """prepare (no header) and fine-tune the micro preset; returns the report and the test split's
    targets (rows, 919)."""
    data, out = tmp_path / "data", tmp_path / "run"
    assert main(["task", "prepare", "--table", str(table), "--no-header", *prepare, "--out", str(data)]) == 0
    assert main(["task", "finetune", "--data", str(data), "--out", str(out), *finetune,
                 "--config", str(micro_preset(tmp_path / "micro.yaml", **train))]) == 0
    report = json.loads((out / "report.json").read_text())
    with open(data / "test.tsv", newline="") as handle:
        test = list(csv.reader(handle, delimiter="\t"))
    targets = np.array([[int(v) for v in row[2:]] for row in test[1:]])
    return report, targets


def check_auc_table(report: dict, targets: np.ndarray):
    """aucs.csv: the 919 DeepSEA profiles in column order, each with the test split's positives of its output."""
    assert report["problem_type"] == "multilabel" and targets.shape[1] == 919
    table = read_auc_table(report["aucs"])
    assert list(table.names) == [profile.name for profile in chromatin_profiles()]
    for name, columns in CLASS_COLUMNS.items():
        assert set(table.classes[columns.start:columns.stop]) == {name}
    np.testing.assert_array_equal(table.positives, targets.sum(axis=0))
    defined = ~np.isnan(table.roc_auc)
    assert defined.sum() == ((targets.sum(axis=0) > 0) & (targets.sum(axis=0) < len(targets))).sum() > 0
    assert ((table.roc_auc[defined] >= 0) & (table.roc_auc[defined] <= 1)).all()
    return table


def test_a_few_deepsea_rows_of_gena_lm_run_the_chain_to_the_auc_table(real_data, tmp_path):
    rows = gena_rows(real_data / GENA_CSV)[:40]
    table = tmp_path / "gena.csv"
    with open(table, "w", newline="") as handle:
        csv.writer(handle).writerows([row[0][3850:4150], *row[1:]] for row in rows)
    report, targets = run_chain(table, tmp_path, ["--fractions", "0.5,0.25,0.25"], ["--set", "kmer_baseline=false"],
                                max_steps=2, val_every_steps=2)
    assert report["data"]["rows"] == {"train": 20, "valid": 10, "test": 10} and len(targets) == 10
    check_auc_table(report, targets)


@pytest.mark.slow
def test_the_gena_lm_deepsea_file_runs_the_chain_and_the_notebook_reads_its_table(shared_data, tmp_path):
    report, targets = run_chain(shared_data / GENA_CSV, tmp_path, [], ["--set", "max_len=512"], max_steps=4,
                                val_every_steps=2)
    assert report["data"]["rows"] == {"train": 80, "valid": 10, "test": 10} and report["min_bp"] == 8000
    table = check_auc_table(report, targets)
    text = run_auc_notebook([str(table.path)], tmp_path / "figures", tmp_path)
    assert f"{int((~np.isnan(table.roc_auc)).sum())} of 919 profiles have an AUC" in text
