"""Evaluate a chromatin classifier: per-profile AUCs, and the ``aucs.csv`` table that ``chromatin
eval`` and ``chromatin finetune`` write and ``notebooks/per_profile_auc.ipynb`` reads
(:func:`read_auc_table`): one row of :data:`AUC_COLUMNS` per DeepSEA profile (919, in column order),
``roc_auc`` and ``pr_auc`` empty for a profile without both positives and negatives in the rows."""

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
    """The per-profile AUCs of a chromatin classifier (or a strand-averaged one) on rows of a
    :class:`~genolong.datasets.chromatin.ChromatinSplit` (:func:`evaluation_rows`), and those rows."""
    chosen = evaluation_rows(len(split), limit)
    scores = predict_all(scorer, (split.sequence(int(row)) for row in chosen), batch_size, progress=progress)
    return per_profile_auc(np.asarray(split.labels[chosen]), scores), chosen


def write_auc_table(path: str | Path, aucs: ProfileAUCs) -> None:
    """Write ``aucs`` (919 profiles) as ``aucs.csv``, atomically."""
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
    atomic_write_text(path, buffer.getvalue())


def _number(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6f}"


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
    """Read an ``aucs.csv``; an InputError for a missing file, other columns, or not 919 profiles in order."""
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
