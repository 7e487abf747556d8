"""``benchmarks/task_cross_source.py`` on a micro run of the mouse promoter task (the shipped
subsets of ``tests/data/promoters``): its held-out row reproduces the run's report, and every set
is scored beside the k-mer model."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from genolong.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PROMOTERS = ROOT / "tests" / "data" / "promoters"


def test_the_cross_source_table_reproduces_the_runs_held_out_scores(tmp_path):
    data, run = tmp_path / "mouse", tmp_path / "run"
    assert main(["task", "prepare", "--class", f"tata={PROMOTERS / 'Mouse_tata.fa'}",
                 "--class", f"nonprom={PROMOTERS / 'Mouse_nonprom.fa'}", "--out", str(data)]) == 0
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump({
        "task": "labelled", "max_len": 256,  # whole 251-bp records: the report reads what the script reads
        "model": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64},
        "tokenizer": {"vocab_size": 64, "sample_bp": 20_000}, "batch_size_eval": 64,
        "train": {"max_steps": 20, "val_every_steps": 10, "batch_size": 16, "warmup_steps": 2,
                  "checkpoint_every_steps": 20},
    }))
    assert main(["task", "finetune", "--data", str(data), "--out", str(run),
                 "--config", str(tmp_path / "micro.yaml")]) == 0
    report = json.loads((run / "report.json").read_text())

    table = tmp_path / "cross.csv"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "task_cross_source.py"), "--run", str(run),
                             "--data", str(data), "--promoters", str(PROMOTERS), "--out", str(table)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(table.open()))
    assert [row["set"].split(" ")[0] for row in rows] == ["held-out", "mouse", "A.", "A."]
    held_out = rows[0]
    # the test split in the report's order and batches: the same bits on any node (the scoring rule)
    assert float(held_out["model_auroc"]) == pytest.approx(report["test"]["auroc"], abs=1e-12)
    # float64 k-mer logits of whole records (the script) and of the token rows (the report): no rank changes
    assert float(held_out["kmer_auroc"]) == pytest.approx(report["kmer_baseline"]["test"]["auroc"], abs=1e-6)
    assert int(held_out["dropped_as_seen"]) == 0  # prepare removed the test split's duplicates already
    assert all(int(row["positives"]) > 0 and int(row["negatives"]) > 0 for row in rows)
