"""Evaluation metrics: binary promoter metrics at a threshold chosen on validation, calibration,
intervals over seeds, and the per-profile AUCs of the chromatin task (919 binary labels, DeepSEA /
BigBird App. F.3) with their medians per class beside the published rows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.stats import rankdata
from sklearn.metrics import (
    average_precision_score,
    f1_score,
    matthews_corrcoef,
    precision_recall_curve,
    precision_score,
    recall_score,
    roc_auc_score,
)

from genolong.core.errors import UserError

#: The promoter metrics in report order.
PROMOTER_METRICS = ("f1", "precision", "recall", "mcc", "auroc", "auprc")


def _binary_inputs(y_true, prob) -> tuple[np.ndarray, np.ndarray]:
    y_true = np.asarray(y_true).astype(int).ravel()
    prob = np.asarray(prob, dtype=float).ravel()
    if y_true.shape != prob.shape:
        raise ValueError(f"{y_true.size} labels but {prob.size} probabilities")
    if set(np.unique(y_true)) != {0, 1}:
        found = sorted(set(y_true.tolist()))
        raise UserError(f"the evaluation set needs both labels 0 and 1, it has {found} "
                        f"({y_true.size} examples)")
    return y_true, prob


def best_f1_threshold(y_true, prob) -> float:
    """The value of ``prob`` (``(n,)`` scores of label 1) that maximizes F1 of ``prob >= threshold``
    against ``y_true`` (``(n,)`` labels 0/1, both present); ties: the lowest threshold."""
    y_true, prob = _binary_inputs(y_true, prob)
    precision, recall, thresholds = precision_recall_curve(y_true, prob)
    # The last precision/recall pair (recall 0) has no threshold.
    denominator = precision[:-1] + recall[:-1]
    f1 = np.divide(2 * precision[:-1] * recall[:-1], denominator, out=np.zeros_like(denominator),
                   where=denominator > 0)
    return float(thresholds[int(np.argmax(f1))])


def promoter_metrics(y_true, prob, threshold: float) -> dict[str, float]:
    """:data:`PROMOTER_METRICS` of ``prob >= threshold`` (chosen on validation: :func:`best_f1_threshold`;
    shapes as there; AUPRC: average precision), ``threshold``, ``n`` and ``n_positive``."""
    y_true, prob = _binary_inputs(y_true, prob)
    y_pred = (prob >= threshold).astype(int)
    return {"f1": float(f1_score(y_true, y_pred, zero_division=0)),
            "precision": float(precision_score(y_true, y_pred, zero_division=0)),
            "recall": float(recall_score(y_true, y_pred, zero_division=0)),
            "mcc": float(matthews_corrcoef(y_true, y_pred)), "auroc": float(roc_auc_score(y_true, prob)),
            "auprc": float(average_precision_score(y_true, prob)), "threshold": float(threshold),
            "n": int(y_true.size), "n_positive": int(y_true.sum())}


def expected_calibration_error(y_true, prob, bins: int = 10) -> float:
    """ECE (Naeini et al. 2015) of labels ``y_true`` ``(n,)`` and probabilities ``prob`` ``(n,)``: the mean
    over ``bins`` equal-width bins of |fraction of positives - mean probability|, weighted by size."""
    y_true = np.asarray(y_true, dtype=float).ravel()
    prob = np.asarray(prob, dtype=float).ravel()
    which = np.minimum((prob * bins).astype(int), bins - 1)
    error = 0.0
    for b in np.unique(which):
        members = which == b
        error += members.mean() * abs(y_true[members].mean() - prob[members].mean())
    return float(error)


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


def format_metrics_table(rows: Mapping[str, Mapping[str, float]]) -> str:
    """A plain-text table, one row per named result (e.g. ``{"kmer baseline": metrics}``)."""
    cells = {name: [f"{metrics[m]:>9.4f}" for m in PROMOTER_METRICS] + [f"{metrics['threshold']:>9.4g}"]
             for name, metrics in rows.items()}
    return _model_table([f"{m:>9}" for m in PROMOTER_METRICS] + ["threshold"], cells)


def _model_table(header: list[str], rows: Mapping[str, list[str]]) -> str:
    """Plain-text lines, cells two spaces apart: ``model`` and the ``header`` cells, then each named row's."""
    width = max(len("model"), *(len(name) for name in rows))
    lines = [("model", header), *rows.items()]
    return "\n".join("  ".join([f"{name:<{width}}", *cells]) for name, cells in lines)


#: Published median ROC AUC per profile class (BigBird Table 7, percent / 100). DeepSEA's
#: row matches the medians of DeepSEA's own Supp. Table 2 (truncated to one decimal).
CHROMATIN_REFERENCE_MEDIAN_AUC = {"DeepSEA": {"TF": 0.958, "DHS": 0.923, "HM": 0.856},
                                  "BigBird": {"TF": 0.961, "DHS": 0.921, "HM": 0.887}}
#: Class order of the chromatin tables (BigBird Table 7 order).
CHROMATIN_CLASSES = ("TF", "DHS", "HM")


@dataclass(frozen=True)
class ProfileAUCs:
    """Per-profile ROC AUC, PR AUC (average precision), both NaN where undefined, and label counts;
    every array has shape ``(profiles,)``."""

    roc_auc: np.ndarray
    pr_auc: np.ndarray
    positives: np.ndarray
    negatives: np.ndarray

    @property
    def defined(self) -> np.ndarray:
        """``(profiles,)`` bool: the profile has both positives and negatives."""
        return (self.positives > 0) & (self.negatives > 0)


def per_profile_auc(labels, scores, *, chunk_elements: int = 1 << 24) -> ProfileAUCs:
    """ROC AUC and PR AUC of every profile (column) of ``labels`` (0/1) and ``scores`` (finite, any
    monotone scale), both ``(examples, profiles)``, as DeepSEA and BigBird evaluate, in chunks of about
    ``chunk_elements``; NaN (never an error) for a profile without positives or negatives. A ValueError
    for other shapes (a caller's bug), a UserError for labels other than 0/1 or non-finite scores.

    scikit-learn's ``roc_auc_score`` and ``average_precision_score`` (step-wise, ties included; the
    tests check it), vectorized (scikit-learn's validation per profile costs minutes on DeepSEA's test
    set): ROC AUC is the Mann-Whitney statistic with average ranks for ties; PR AUC is ``sum_k (R_k -
    R_{k-1}) P_k`` over the distinct thresholds k in decreasing order: each positive contributes the
    precision at the lowest-ranked end of its group of tied scores, divided by the number of positives."""
    labels, scores = np.asarray(labels), np.asarray(scores, dtype=np.float64)
    if labels.ndim != 2 or labels.shape != scores.shape:
        raise ValueError(f"labels {labels.shape} and scores {scores.shape} must both be (examples, profiles)")
    if not np.isin(labels, (0, 1)).all():
        raise UserError("chromatin labels must be 0 or 1")
    if not np.isfinite(scores).all():
        raise UserError("chromatin scores contain NaN or infinite values")
    rows = len(labels)
    positives = labels.sum(axis=0, dtype=np.int64)
    negatives = rows - positives
    roc, pr = np.full(labels.shape[1], np.nan), np.full(labels.shape[1], np.nan)
    defined = np.flatnonzero((positives > 0) & (negatives > 0))
    step = max(1, chunk_elements // max(rows, 1))
    for begin in range(0, len(defined), step):
        columns = defined[begin : begin + step]
        y, s = labels[:, columns].astype(np.float64), scores[:, columns]  # (rows, c)
        n_pos, n_neg = positives[columns], negatives[columns]
        rank_sum = (rankdata(s, axis=0) * y).sum(axis=0)
        roc[columns] = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
        order = np.argsort(-s, axis=0, kind="stable")
        s, y = np.take_along_axis(s, order, axis=0), np.take_along_axis(y, order, axis=0)
        precision = np.cumsum(y, axis=0) / np.arange(1, rows + 1)[:, None]
        group_end = np.ones_like(s, dtype=bool)
        group_end[:-1] = s[:-1] != s[1:]  # last row of each group of tied scores
        end_index = np.where(group_end, np.arange(rows)[:, None], rows)
        end_index = np.minimum.accumulate(end_index[::-1], axis=0)[::-1]  # each row's group end
        pr[columns] = (y * np.take_along_axis(precision, end_index, axis=0)).sum(axis=0) / n_pos
    return ProfileAUCs(roc, pr, positives, negatives)


def median_auc_by_class(auc, classes) -> dict[str, dict[str, float | int]]:
    """``{class: {"median": m, "profiles": defined, "undefined": n}}``: the median of the non-NaN ``auc``
    (NaN if none) per class of ``classes``, both ``(profiles,)``, in :data:`CHROMATIN_CLASSES` order."""
    auc, classes = np.asarray(auc, dtype=np.float64), np.asarray(classes)
    if auc.shape != classes.shape:
        raise ValueError(f"{auc.shape} AUCs but {classes.shape} classes")
    names = [name for name in CHROMATIN_CLASSES if name in classes]
    names += sorted(set(classes.tolist()) - set(names))
    summary = {}
    for name in names:
        values = auc[classes == name]
        defined = values[~np.isnan(values)]
        summary[name] = {"median": float(np.median(defined)) if len(defined) else float("nan"),
                         "profiles": len(defined), "undefined": len(values) - len(defined)}
    return summary


def format_chromatin_medians(medians: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    """Median ROC AUC (percent) per class for each model of ``medians`` (``{model name:
    median_auc_by_class(...)}``), then the published reference rows."""
    rows = {name: {cls: summary[cls]["median"] for cls in summary} for name, summary in medians.items()}
    rows.update({f"{name} (published)": values for name, values in CHROMATIN_REFERENCE_MEDIAN_AUC.items()})
    cells = {name: [f"{100 * values[c]:>6.1f}" if c in values else f"{'-':>6}" for c in CHROMATIN_CLASSES]
             for name, values in rows.items()}
    return _model_table([f"{cls:>6}" for cls in CHROMATIN_CLASSES], cells)
