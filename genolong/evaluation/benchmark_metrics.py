"""The metrics a benchmark reports per run, and their mean and confidence interval over seeds.

Benchmark suites are classification tasks; the metric their papers report is named per suite
(:data:`PAPER_METRIC`): MCC for GUE (DNABERT-2), accuracy for Genomic Benchmarks, MCC (and F1)
for the Nucleotide Transformer tasks. Every run also reports AUROC, which needs no threshold.

- ``binary``: accuracy, F1, MCC at a threshold chosen on the validation split (max F1), AUROC;
- ``multiclass``: accuracy, macro-F1, MCC of the most probable class, and AUROC one-vs-rest
  (macro average; NaN when the rows lack a class).

The interval over seeds is Student's t: ``mean ± t(0.975, n - 1) * sd / sqrt(n)`` with the
sample standard deviation (n - 1 in the denominator); undefined (NaN) for a single value.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef, roc_auc_score

#: The metrics of every run, in the order results list them.
METRICS = ("accuracy", "f1", "mcc", "auroc")
#: The problem types a benchmark task may have.
CLASSIFICATION = ("binary", "multiclass")


def classification_metrics(problem_type: str, targets: np.ndarray, outputs: np.ndarray,
                           threshold: float | None = None) -> dict[str, float]:
    """:data:`METRICS` of one model on some rows.

    Args:
        problem_type: ``binary`` or ``multiclass``.
        targets: (N, 1) as a prepared task stores them: 0/1, or the class index.
        outputs: (N, 1) positive-class probabilities (binary) or (N, C) class probabilities.
        threshold: binary: the probability from which a row is called positive (required).
    """
    y = targets[:, 0].astype(int)
    if problem_type == "binary":
        if threshold is None:
            raise ValueError("a binary task's metrics need the threshold chosen on validation")
        predicted = (outputs[:, 0] >= threshold).astype(int)
        f1 = f1_score(y, predicted, zero_division=0)
        auroc = roc_auc_score(y, outputs[:, 0]) if 0 < y.sum() < len(y) else math.nan
    else:
        predicted = outputs.argmax(axis=1)
        labels = np.arange(outputs.shape[1])
        f1 = f1_score(y, predicted, labels=labels, average="macro", zero_division=0)
        present = len(np.unique(y)) == outputs.shape[1]
        auroc = roc_auc_score(y, outputs, multi_class="ovr", labels=labels) if present else math.nan
    return {"accuracy": float(accuracy_score(y, predicted)), "f1": float(f1),
            "mcc": float(matthews_corrcoef(y, predicted)), "auroc": float(auroc)}


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """``(mean, half-width)`` of the Student's t interval of the mean of ``values`` (NaN values
    left out); the half-width is NaN for fewer than two values."""
    values = np.asarray([v for v in values if not math.isnan(v)], dtype=np.float64)
    if len(values) == 0:
        return math.nan, math.nan
    if len(values) == 1:
        return float(values[0]), math.nan
    sd = float(values.std(ddof=1))
    return float(values.mean()), float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * sd / math.sqrt(len(values)))
