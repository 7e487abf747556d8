"""Evaluation metrics.

Promoter prediction (binary): :func:`best_f1_threshold` picks the decision threshold on
validation, :func:`promoter_metrics` reports F1, precision, recall, MCC, AUROC and AUPRC
(scikit-learn) at that threshold on test, and :func:`format_metrics_table` prints several
models side by side (model vs baseline).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from sklearn.metrics import (
    average_precision_score,
    f1_score,
    matthews_corrcoef,
    precision_recall_curve,
    precision_score,
    recall_score,
    roc_auc_score,
)

from genolong.errors import UserError

#: The promoter metrics in report order.
PROMOTER_METRICS = ("f1", "precision", "recall", "mcc", "auroc", "auprc")


def _binary_inputs(y_true, prob) -> tuple[np.ndarray, np.ndarray]:
    y_true = np.asarray(y_true).astype(int).ravel()
    prob = np.asarray(prob, dtype=float).ravel()
    if y_true.shape != prob.shape:
        raise ValueError(f"{y_true.size} labels but {prob.size} probabilities")
    if set(np.unique(y_true)) != {0, 1}:
        raise UserError(
            f"the evaluation set needs both labels 0 and 1, it has {sorted(set(y_true.tolist()))} "
            f"({y_true.size} examples)"
        )
    return y_true, prob


def best_f1_threshold(y_true, prob) -> float:
    """The threshold that maximizes F1 of ``prob >= threshold`` (ties: the lowest threshold).

    Args:
        y_true: shape ``(n,)``, labels 0/1 (both present).
        prob: shape ``(n,)``, scores or probabilities of label 1.

    Returns:
        One of the values of ``prob``.
    """
    y_true, prob = _binary_inputs(y_true, prob)
    precision, recall, thresholds = precision_recall_curve(y_true, prob)
    # The last precision/recall pair (recall 0) has no threshold.
    denominator = precision[:-1] + recall[:-1]
    f1 = np.divide(
        2 * precision[:-1] * recall[:-1], denominator, out=np.zeros_like(denominator), where=denominator > 0
    )
    return float(thresholds[int(np.argmax(f1))])


def promoter_metrics(y_true, prob, threshold: float) -> dict[str, float]:
    """Binary metrics of ``prob >= threshold``, plus the threshold-free AUROC and AUPRC.

    Args:
        y_true: shape ``(n,)``, labels 0/1 (both present).
        prob: shape ``(n,)``, scores or probabilities of label 1.
        threshold: decision threshold (choose it on validation with :func:`best_f1_threshold`).

    Returns:
        ``f1``, ``precision``, ``recall``, ``mcc``, ``auroc``, ``auprc`` (average precision),
        and ``threshold``, ``n``, ``n_positive``.
    """
    y_true, prob = _binary_inputs(y_true, prob)
    y_pred = (prob >= threshold).astype(int)
    return {
        "f1": float(f1_score(y_true, y_pred, zero_division=0)),
        "precision": float(precision_score(y_true, y_pred, zero_division=0)),
        "recall": float(recall_score(y_true, y_pred, zero_division=0)),
        "mcc": float(matthews_corrcoef(y_true, y_pred)),
        "auroc": float(roc_auc_score(y_true, prob)),
        "auprc": float(average_precision_score(y_true, prob)),
        "threshold": float(threshold),
        "n": int(y_true.size),
        "n_positive": int(y_true.sum()),
    }


def format_metrics_table(rows: Mapping[str, Mapping[str, float]]) -> str:
    """A plain-text table, one row per named result (e.g. ``{"kmer baseline": metrics}``)."""
    width = max(len("model"), *(len(name) for name in rows))
    lines = [f"{'model':<{width}}  " + "  ".join(f"{m:>9}" for m in PROMOTER_METRICS) + "  threshold"]
    for name, metrics in rows.items():
        lines.append(
            f"{name:<{width}}  "
            + "  ".join(f"{metrics[m]:>9.4f}" for m in PROMOTER_METRICS)
            + f"  {metrics['threshold']:>9.4g}"
        )
    return "\n".join(lines)
