"""Metrics by problem type (:data:`METRICS`), with scikit-learn, of a split's targets (N, K) as stored
(binary 0/1 and class ids: K = 1) and a classifier's outputs (N, C) (probabilities, or regression
values); a benchmark compares classifiers on one set of metrics (:func:`classification_metrics`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    f1_score,
    matthews_corrcoef,
    mean_squared_error,
    r2_score,
    roc_auc_score,
)

from genolong.datasets.task import PROBLEM_TYPES
from genolong.evaluation.metrics import best_f1_threshold, promoter_metrics

#: The metrics of every benchmark run, in the order results list them (:func:`classification_metrics`).
BENCHMARK_METRICS = ("accuracy", "f1", "mcc", "auroc")
#: The problem types a benchmark compares classifiers on.
CLASSIFICATION = PROBLEM_TYPES[:2]


def binary_metrics(targets: np.ndarray, outputs: np.ndarray, threshold: float | None = None) -> dict[str, float]:
    """F1, precision, recall, MCC, AUROC, AUPRC of one output; ``threshold`` None: the F1-best one on these rows."""
    y, p = targets[:, 0], outputs[:, 0]
    threshold = best_f1_threshold(y, p) if threshold is None else threshold
    return promoter_metrics(y, p, threshold) | {"threshold": float(threshold)}


def multiclass_metrics(targets: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """Accuracy, macro-F1 and MCC of the most probable class."""
    return _calls(targets[:, 0].astype(int), outputs.argmax(axis=1), np.arange(outputs.shape[1]), "macro_f1")


def _calls(y: np.ndarray, predicted: np.ndarray, labels: np.ndarray | None, f1: str) -> dict[str, float]:
    """Accuracy, F1 (under the name ``f1``; macro over ``labels`` unless None) and MCC of class calls."""
    average = {"average": "binary"} if labels is None else {"labels": labels, "average": "macro"}
    return {"accuracy": float(accuracy_score(y, predicted)),
            f1: float(f1_score(y, predicted, zero_division=0, **average)),
            "mcc": float(matthews_corrcoef(y, predicted))}


def per_label_aucs(targets: np.ndarray, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ROC and PR AUC per label (C,), NaN where a label lacks positives or negatives."""
    roc, pr = np.full(targets.shape[1], np.nan), np.full(targets.shape[1], np.nan)
    for j in range(targets.shape[1]):
        if 0 < targets[:, j].sum() < len(targets):
            roc[j] = roc_auc_score(targets[:, j], outputs[:, j])
            pr[j] = average_precision_score(targets[:, j], outputs[:, j])
    return roc, pr


def multilabel_metrics(targets: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """Median and mean ROC/PR AUC over the labels that have both classes, and their number."""
    roc, pr = per_label_aucs(targets, outputs)
    defined = ~np.isnan(roc)
    result = {"labels_with_auc": float(defined.sum())}
    for name, values in (("auroc", roc[defined]), ("auprc", pr[defined])):
        result |= {f"median_{name}": float(np.median(values)) if len(values) else np.nan,
                   f"mean_{name}": float(values.mean()) if len(values) else np.nan}
    return result


def correlation(y: np.ndarray, p: np.ndarray, method=pearsonr) -> float:
    """The ``method`` (``pearsonr``, ``spearmanr``) coefficient of two (N,) arrays; NaN if one is constant."""
    return np.nan if np.ptp(y) == 0 or np.ptp(p) == 0 else float(method(y, p)[0])


def regression_metrics(targets: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """Pearson, Spearman, R² and MSE per output (``name_j``) and their means."""
    result = {}
    kinds = {"pearson": correlation, "spearman": functools.partial(correlation, method=spearmanr),
             "r2": r2_score, "mse": mean_squared_error}
    for kind, metric in kinds.items():
        values = [float(metric(targets[:, j], outputs[:, j])) for j in range(targets.shape[1])]
        result |= {f"{kind}_{j}": v for j, v in enumerate(values)}
        result[f"mean_{kind}"] = float(np.nanmean(values)) if not np.isnan(values).all() else np.nan
    return result


@dataclass(frozen=True)
class ProblemMetrics:
    """The metrics of one problem type: ``compute(targets, outputs)``, the metric selected on
    (``monitor``, higher is better) and those a summary shows."""

    compute: Callable[[np.ndarray, np.ndarray], dict[str, float]]
    monitor: str
    shown: tuple[str, ...]


#: The metrics of each problem type, in the order of :data:`~genolong.datasets.task.PROBLEM_TYPES`.
METRICS = dict(zip(PROBLEM_TYPES, (
    ProblemMetrics(binary_metrics, "auroc", ("auroc", "auprc", "f1", "mcc")),
    ProblemMetrics(multiclass_metrics, "macro_f1", ("accuracy", "macro_f1", "mcc")),
    ProblemMetrics(multilabel_metrics, "mean_auroc", ("median_auroc", "median_auprc", "labels_with_auc")),
    ProblemMetrics(regression_metrics, "mean_pearson", ("mean_pearson", "mean_spearman", "mean_r2", "mean_mse")),
), strict=True))


def task_metrics(problem_type: str, targets: np.ndarray, outputs: np.ndarray,
                 threshold: float | None = None) -> dict[str, float]:
    """The metrics of ``problem_type`` (``threshold``: binary only, see :func:`binary_metrics`)."""
    if problem_type == "binary":
        return binary_metrics(targets, outputs, threshold)
    return METRICS[problem_type].compute(targets, outputs)


def classification_metrics(problem_type: str, targets: np.ndarray, outputs: np.ndarray,
                           threshold: float | None = None) -> dict[str, float]:
    """:data:`BENCHMARK_METRICS` of one model on rows of a :data:`CLASSIFICATION` type: accuracy, F1 and
    AUROC (multi-class: macro; AUROC one-vs-rest, NaN when the rows lack a class), MCC. ``targets`` (N, 1)
    as stored; ``outputs`` (N, 1) or (N, C) probabilities; ``threshold``: binary, required."""
    y = targets[:, 0].astype(int)
    if problem_type == "binary":
        if threshold is None:
            raise ValueError("a binary task's metrics need the threshold chosen on validation")
        metrics = _calls(y, (outputs[:, 0] >= threshold).astype(int), None, "f1")
        auroc = roc_auc_score(y, outputs[:, 0]) if 0 < y.sum() < len(y) else math.nan
    else:
        labels = np.arange(outputs.shape[1])
        metrics = _calls(y, outputs.argmax(axis=1), labels, "f1")
        present = len(np.unique(y)) == outputs.shape[1]
        auroc = roc_auc_score(y, outputs, multi_class="ovr", labels=labels) if present else math.nan
    return metrics | {"auroc": float(auroc)}
