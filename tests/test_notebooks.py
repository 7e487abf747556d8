"""notebooks/per_profile_auc.ipynb runs top to bottom (nbclient) on generated AUC tables and on
the aucs.csv of a micro chromatin model fine-tuned on the 100 real DeepSEA rows."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from classify_helpers import finetuned_chromatin

from genolong.chromatin_eval import write_auc_table
from genolong.chromatin_profiles import N_PROFILES
from genolong.metrics import ProfileAUCs

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "per_profile_auc.ipynb"
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


def run_notebook(tables: list[str], figures: Path, workdir: Path) -> str:
    """Execute the notebook; return the text of all its outputs."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    environment = {
        "GENOLONG_AUC_FILES": os.pathsep.join(tables),
        "GENOLONG_FIGURES": str(figures),
        "MPLBACKEND": "Agg",
    }
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)  # the kernel inherits the environment at start
    try:
        nbclient.NotebookClient(
            notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
        ).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return "\n".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )


def test_notebook_compares_two_generated_tables(tmp_path):
    a = generated_table(tmp_path / "a" / "aucs.csv", 0)
    b = generated_table(tmp_path / "b" / "aucs.csv", 1)
    text = run_notebook([f"full={a}", f"bigbird={b}"], tmp_path / "figures", tmp_path)
    assert {p.name for p in (tmp_path / "figures").iterdir()} == FIGURES
    assert all((tmp_path / "figures" / name).stat().st_size > 5000 for name in FIGURES)
    assert "full: " in text and "889 of 919 profiles have an AUC" in text
    assert "DeepSEA (published)" in text and "95.8" in text and "88.7" in text
    assert "bigbird beats full on" in text
    assert "== full: best 10 ==" in text and "== bigbird: worst 10 ==" in text


def test_notebook_runs_on_a_fine_tuned_models_table(shared_data, tmp_path, tmp_path_factory):
    _, _, report = finetuned_chromatin(shared_data, tmp_path_factory)
    table = Path(report["test"]["aucs"])
    text = run_notebook([str(table)], tmp_path / "figures", tmp_path)
    assert {p.name for p in (tmp_path / "figures").iterdir()} == FIGURES - {"per_profile_scatter.png"}
    assert f"run: {table}: {report['test']['profiles_with_auc']} of 919 profiles have an AUC" in text
    assert "one table only" in text
