"""Metrics by problem type, with scikit-learn (the problem types of :mod:`genolong.datasets.task`).

Inputs are a split's targets (N, K) as stored (binary 0/1 and multiclass class ids: K = 1) and
outputs (N, C) as a classifier gives them (sigmoid probabilities, softmax probabilities or
regression values):

- ``binary``: F1, precision, recall, MCC at a threshold (chosen on validation: max F1), AUROC, AUPRC;
- ``multiclass``: accuracy, macro-F1, MCC of the arg-max class;
- ``multilabel``: ROC and PR AUC per label (labels with both classes), their medians and means;
- ``regression``: Pearson, Spearman, R² and MSE per output, and their means.

:data:`MONITOR` names the metric each problem type's early stopping follows (higher is better).
"""

from __future__ import annotations

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

from genolong.evaluation.metrics import best_f1_threshold, promoter_metrics

#: The metric each problem type is selected on (higher is better).
MONITOR = {"binary": "auroc", "multiclass": "macro_f1", "multilabel": "mean_auroc", "regression": "mean_pearson"}


def binary_metrics(targets: np.ndarray, outputs: np.ndarray, threshold: float | None = None) -> dict[str, float]:
    """F1, precision, recall, MCC, AUROC, AUPRC of one output; ``threshold`` None: the F1-best one on these rows."""
    y, p = targets[:, 0], outputs[:, 0]
    threshold = best_f1_threshold(y, p) if threshold is None else threshold
    return promoter_metrics(y, p, threshold) | {"threshold": float(threshold)}


def multiclass_metrics(targets: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """Accuracy, macro-F1 and MCC of the most probable class."""
    y, predicted = targets[:, 0].astype(int), outputs.argmax(axis=1)
    labels = np.arange(outputs.shape[1])
    return {
        "accuracy": float(accuracy_score(y, predicted)),
        "macro_f1": float(f1_score(y, predicted, labels=labels, average="macro", zero_division=0)),
        "mcc": float(matthews_corrcoef(y, predicted)),
    }


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
    if not defined.any():
        return {"labels_with_auc": 0.0, "median_auroc": np.nan, "mean_auroc": np.nan, "median_auprc": np.nan,
                "mean_auprc": np.nan}
    return {
        "labels_with_auc": float(defined.sum()),
        "median_auroc": float(np.median(roc[defined])),
        "mean_auroc": float(roc[defined].mean()),
        "median_auprc": float(np.median(pr[defined])),
        "mean_auprc": float(pr[defined].mean()),
    }


def regression_metrics(targets: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """Pearson, Spearman, R² and MSE per output (``name_j``) and their means (an output without
    variance has NaN correlations)."""
    result = {}
    for kind in ("pearson", "spearman", "r2", "mse"):
        values = []
        for j in range(targets.shape[1]):
            y, p = targets[:, j], outputs[:, j]
            constant = np.ptp(y) == 0 or np.ptp(p) == 0
            if kind == "pearson":
                values.append(np.nan if constant else float(pearsonr(y, p)[0]))
            elif kind == "spearman":
                values.append(np.nan if constant else float(spearmanr(y, p)[0]))
            elif kind == "r2":
                values.append(float(r2_score(y, p)))
            else:
                values.append(float(mean_squared_error(y, p)))
        result |= {f"{kind}_{j}": v for j, v in enumerate(values)}
        result[f"mean_{kind}"] = float(np.nanmean(values)) if not np.isnan(values).all() else np.nan
    return result


def task_metrics(problem_type: str, targets: np.ndarray, outputs: np.ndarray,
                 threshold: float | None = None) -> dict[str, float]:
    """The metrics of ``problem_type`` (``threshold``: binary only, see :func:`binary_metrics`)."""
    if problem_type == "binary":
        return binary_metrics(targets, outputs, threshold)
    if problem_type == "multiclass":
        return multiclass_metrics(targets, outputs)
    if problem_type == "multilabel":
        return multilabel_metrics(targets, outputs)
    return regression_metrics(targets, outputs)
