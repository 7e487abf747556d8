"""Running the notebooks of ``notebooks/`` top to bottom (nbclient) with their inputs in the environment."""

from __future__ import annotations

import os
from pathlib import Path

import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def run_notebook(name: str, environment: dict[str, str], workdir: Path) -> str:
    """Execute ``notebooks/<name>`` with ``environment``; return the text of all its outputs."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    environment = environment | {"MPLBACKEND": "Agg"}
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


def run_auc_notebook(tables: list[str], figures: Path, workdir: Path) -> str:
    environment = {"GENOLONG_AUC_FILES": os.pathsep.join(tables), "GENOLONG_FIGURES": str(figures)}
    return run_notebook("per_profile_auc.ipynb", environment, workdir)
