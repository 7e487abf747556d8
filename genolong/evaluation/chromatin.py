"""Evaluate a chromatin classifier: per-profile AUCs, and the ``aucs.csv`` table.

``aucs.csv`` has one row per DeepSEA profile (919, in column order)::

    index,name,cell_type,assay,treatment,class,positives,negatives,roc_auc,pr_auc

``roc_auc`` and ``pr_auc`` are empty for a profile without both positives and negatives in
the evaluated rows (DeepSEA's test set has such profiles; so has any small subset).
``genolong chromatin eval`` and ``genolong chromatin finetune`` write it; the notebook
``notebooks/per_profile_auc.ipynb`` reads it with :func:`read_auc_table`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genolong.classifier.records import predict_all
from genolong.core.errors import InputError
from genolong.core.files import atomic_write_text
from genolong.evaluation.metrics import ProfileAUCs, median_auc_by_class, per_profile_auc
from genolong.evaluation.profiles import N_PROFILES, chromatin_profiles

AUC_COLUMNS = ("index", "name", "cell_type", "assay", "treatment", "class", "positives", "negatives",
               "roc_auc", "pr_auc")


def evaluation_rows(rows: int, limit: int | None) -> np.ndarray:
    """Rows to evaluate: all, or ``limit`` evenly spaced ones (deterministic)."""
    if limit is None or limit >= rows:
        return np.arange(rows)
    return np.unique(np.linspace(0, rows - 1, limit).round().astype(int))


def evaluate_chromatin(scorer, split, *, batch_size: int = 16, limit: int | None = None,
                       progress=None) -> tuple[ProfileAUCs, np.ndarray]:
    """Score the rows of a prepared chromatin split and compute per-profile AUCs.

    Args:
        scorer: a chromatin :class:`~genolong.classifier.directory.Classifier` (or strand-averaged one).
        split: a :class:`~genolong.datasets.chromatin.ChromatinSplit`; each row's
            model input is ``split.sequence(row)`` (the context window, or the original
            input for unlocated rows).
        batch_size: rows per model call.
        limit: evaluate ``limit`` evenly spaced rows instead of all.

    Returns:
        The AUCs and the evaluated row numbers.
    """
    chosen = evaluation_rows(len(split), limit)
    scores = predict_all(scorer, (split.sequence(int(row)) for row in chosen), batch_size, progress=progress)
    return per_profile_auc(np.asarray(split.labels[chosen]), scores), chosen


def auc_table_text(aucs: ProfileAUCs) -> str:
    """The CSV text of ``aucs`` (919 profiles)."""
    if len(aucs.roc_auc) != N_PROFILES:
        raise ValueError(f"expected {N_PROFILES} profiles, got {len(aucs.roc_auc)}")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(AUC_COLUMNS)
    for profile in chromatin_profiles():
        i = profile.index
        writer.writerow([i, profile.name, profile.cell_type, profile.assay, profile.treatment,
                         profile.profile_class, int(aucs.positives[i]), int(aucs.negatives[i]),
                         _number(aucs.roc_auc[i]), _number(aucs.pr_auc[i])])
    return buffer.getvalue()


def _number(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6f}"


def write_auc_table(path: str | Path, aucs: ProfileAUCs) -> None:
    """Write ``aucs.csv`` atomically."""
    atomic_write_text(path, auc_table_text(aucs))


@dataclass(frozen=True)
class AucTable:
    """An ``aucs.csv`` read back; every array has shape (919,), NaN where the AUC is undefined."""

    path: Path
    names: np.ndarray
    cell_types: np.ndarray
    assays: np.ndarray
    classes: np.ndarray
    positives: np.ndarray
    roc_auc: np.ndarray
    pr_auc: np.ndarray

    def medians(self, metric: str = "roc_auc") -> dict:
        """:func:`genolong.evaluation.metrics.median_auc_by_class` of ``metric``."""
        return median_auc_by_class(getattr(self, metric), self.classes)


def read_auc_table(path: str | Path) -> AucTable:
    """Read an ``aucs.csv``.

    Raises:
        InputError: missing file, other columns, or not 919 profiles in order.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such AUC table (write one with `genolong chromatin eval`)")
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header) != AUC_COLUMNS:
            raise InputError(path, f"header is {header}, expected {','.join(AUC_COLUMNS)}", line=1)
        rows = list(reader)
    if len(rows) != N_PROFILES or any(row[0] != str(i) for i, row in enumerate(rows)):
        raise InputError(path, f"expected {N_PROFILES} profile rows with index 0..{N_PROFILES - 1} in order")
    columns = dict(zip(AUC_COLUMNS, zip(*rows, strict=True), strict=True))

    def numbers(name: str) -> np.ndarray:
        try:
            return np.array([float(v) if v else np.nan for v in columns[name]])
        except ValueError as err:
            raise InputError(path, f"column {name}: {err}") from None

    return AucTable(path, np.array(columns["name"]), np.array(columns["cell_type"]),
                    np.array(columns["assay"]), np.array(columns["class"]), numbers("positives").astype(int),
                    numbers("roc_auc"), numbers("pr_auc"))
