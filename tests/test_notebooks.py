"""The notebooks run top to bottom (nbclient): per_profile_auc.ipynb on generated AUC tables and on
the aucs.csv of a micro chromatin model fine-tuned on the 100 real DeepSEA rows;
compare_backbones.ipynb on generated comparison and ablation results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.classify import finetuned_chromatin
from helpers.notebooks import NOTEBOOKS, run_auc_notebook, run_notebook

from genolong.evaluation.chromatin import write_auc_table
from genolong.evaluation.compare_report import CURVE_COLUMNS
from genolong.evaluation.metrics import ProfileAUCs
from genolong.evaluation.profiles import N_PROFILES

FIGURES = {"auc_distributions.png", "median_auc_by_class.png", "per_profile_scatter.png"}


def generated_table(path: Path, seed: int) -> Path:
    """An aucs.csv with plausible AUCs: TF highest, HM lowest, 30 profiles undefined."""
    rng = np.random.default_rng(seed)
    centre = np.r_[np.full(125, 0.90), np.full(690, 0.95), np.full(104, 0.85)]
    roc = np.clip(centre + rng.normal(0, 0.03, N_PROFILES), 0.5, 1.0)
    pr = np.clip(roc - 0.5 + rng.normal(0, 0.05, N_PROFILES), 0.0, 1.0)
    positives = rng.integers(1, 500, N_PROFILES)
    undefined = rng.choice(N_PROFILES, 30, replace=False)
    roc[undefined] = pr[undefined] = np.nan
    positives[undefined] = 0
    write_auc_table(path, ProfileAUCs(roc, pr, positives, 1000 - positives))
    return path


def test_notebook_compares_two_generated_tables(tmp_path):
    a = generated_table(tmp_path / "a" / "aucs.csv", 0)
    b = generated_table(tmp_path / "b" / "aucs.csv", 1)
    text = run_auc_notebook([f"full={a}", f"bigbird={b}"], tmp_path / "figures", tmp_path)
    assert {p.name for p in (tmp_path / "figures").iterdir()} == FIGURES
    assert all((tmp_path / "figures" / name).stat().st_size > 5000 for name in FIGURES)
    assert "full: " in text and "889 of 919 profiles have an AUC" in text
    assert "DeepSEA (published)" in text and "95.8" in text and "88.7" in text
    assert "bigbird beats full on" in text
    assert "== full: best 10 ==" in text and "== bigbird: worst 10 ==" in text


def test_notebook_runs_on_a_fine_tuned_models_table(real_data, tmp_path, tmp_path_factory):
    _, _, report = finetuned_chromatin(real_data, tmp_path_factory)
    table = Path(report["test"]["aucs"])
    text = run_auc_notebook([str(table)], tmp_path / "figures", tmp_path)
    assert {p.name for p in (tmp_path / "figures").iterdir()} == FIGURES - {"per_profile_scatter.png"}
    assert f"run: {table}: {report['test']['profiles_with_auc']} of 919 profiles have an AUC" in text
    assert "one table only" in text


def generated_comparison(out: Path, with_ablation: bool) -> Path:
    """comparison.csv and curves for the six backbones (and an ablation where BPC falls with length)."""
    from genolong.evaluation.compare_report import ABLATION_COLUMNS, COLUMNS, write_csv
    from genolong.experiments.compare import load_compare_config

    rng = np.random.default_rng(0)
    rows = [{"backbone": name, "parameters": 400_000, "max_len": 1024, "pretrain_steps": 300,
             "train_tokens_per_s": float(rng.uniform(2000, 6000)), "train_peak_mb": float(rng.uniform(200, 900)),
             "val_bpc": 1.95 - 0.01 * i, "unigram_bpc": 1.99, "finetune_steps": 400, "promoter_f1": 0.80 + 0.01 * i,
             "promoter_auroc": 0.90, "promoter_mcc": 0.6, "kmer_f1": 0.785,
             "infer_windows_per_s": float(rng.uniform(5, 50)), "pretrain_s": 600.0, "finetune_s": 60.0,
             "device": "cpu x2"} for i, name in enumerate(load_compare_config("tiny").backbones)]
    curves = [{"run": r["backbone"], "backbone": r["backbone"], "max_len": 1024, "step": step,
               "tokens_seen": step * 8192, "val_bpc": r["val_bpc"] + 0.1 / step} for r in rows
              for step in (50, 100, 300)]
    write_csv(out / "comparison.csv", rows, COLUMNS)
    write_csv(out / "comparison_curves.csv", curves, CURVE_COLUMNS)
    if with_ablation:
        ablation = [{"backbone": "bigbird", "max_len": n, "batch_size": 8192 // n, "steps": 300,
                     "tokens_seen": 300 * 8192, "val_bpc": 2.0 - n / 1e5, "unigram_bpc": 2.0, "gain_bpc": n / 1e5,
                     "train_tokens_per_s": 4000.0, "pretrain_s": 600.0, "device": "cpu x2"}
                    for n in (512, 1024, 2048, 4096)]
        write_csv(out / "context_ablation.csv", ablation, ABLATION_COLUMNS)
        write_csv(out / "context_ablation_curves.csv",
                  [{"run": f"bigbird_{r['max_len']}", "backbone": "bigbird", "max_len": r["max_len"], "step": 300,
                    "tokens_seen": r["tokens_seen"], "val_bpc": r["val_bpc"]} for r in ablation], CURVE_COLUMNS)
    return out


@pytest.mark.parametrize("with_ablation", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_compare_notebook_on_generated_results(tmp_path, with_ablation):
    results = generated_comparison(tmp_path / "results", with_ablation)
    figures = tmp_path / "figures"
    text = run_notebook("compare_backbones.ipynb",
                        {"GENOLONG_COMPARE_DIR": str(results), "GENOLONG_FIGURES": str(figures)}, tmp_path)
    assert "6 backbones: full, bigbird, longformer, lsg, vcc, sled" in text
    assert "| backbone | parameters |" in text and "| sled | 400,000 |" in text
    assert "relative to full:" in text and "lowest validation BPC: sled (1.9000" in text
    expected = {"bpc_vs_step.png", "quality_vs_speed.png"} | ({"context_ablation.png"} if with_ablation else set())
    assert {p.name for p in figures.iterdir()} == expected
    if with_ablation:
        assert "bigbird: 512 -> 4096 tokens" in text and "longer context helped" in text
    else:
        assert "no context ablation in" in text


def test_the_guide_documents_every_variable_the_notebooks_read():
    import re

    guide = (NOTEBOOKS.parent / "docs" / "guide" / "notebooks.md").read_text()
    read = {variable for path in NOTEBOOKS.glob("*.ipynb")
            for variable in re.findall(r"os\.environ\.get\(\\?\"(GENOLONG_\w+)", path.read_text())}
    assert {"GENOLONG_AUC_FILES", "GENOLONG_COMPARE_DIR", "GENOLONG_FIGURES"} <= read
    assert {variable for variable in read if f"`{variable}`" not in guide} == set()
