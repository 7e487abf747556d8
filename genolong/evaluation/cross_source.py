"""Promoter metrics per (promoter source, non-promoter source) pair of a split.

A held-out-source split mixes several kinds of negatives (real non-promoters, genomic
background, substitution and shuffle negatives), and one pooled score hides which kind a
model fails on. :func:`pair_metrics` scores every promoter source of a split against
every non-promoter source of the same split (derived negatives only against the promoters
they were made from), and all of them together, at one threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from genolong.evaluation.metrics import expected_calibration_error, promoter_metrics

ALL = "all"


def pair_metrics(labels: Sequence[int], probabilities: np.ndarray, threshold: float,
                 sources: Sequence[str]) -> dict[str, dict[str, float]]:
    """Metrics of each ``<promoter source> vs <non-promoter source>`` pair, and of ``all`` records.

    Args:
        labels: shape ``(n,)``, 1 for a promoter.
        probabilities: shape ``(n,)``, the promoter probability of each record.
        threshold: the decision threshold (chosen elsewhere, never on these records).
        sources: shape ``(n,)``, the source of each record (datasets built by source).

    Returns:
        ``{"all": metrics, "P vs N": metrics, ...}``, each as
        :func:`genolong.evaluation.metrics.promoter_metrics` plus ``ece`` (10 equal-width bins).
    """
    probabilities = np.asarray(probabilities, dtype=float).ravel()
    labels, sources = np.asarray(labels).astype(int), np.asarray(sources, dtype=object)
    groups = {ALL: np.ones(len(labels), dtype=bool)}
    for positive in sorted(set(sources[labels == 1])):
        for negative in sorted(set(sources[labels == 0])):
            if _comparable(positive, negative):
                groups[f"{positive} vs {negative}"] = (sources == positive) | (sources == negative)
    return {name: _metrics(labels[rows], probabilities[rows], threshold) for name, rows in groups.items()}


def _comparable(positive: str, negative: str) -> bool:
    """Real negatives pair with every promoter source; derived ones (``<source>|<method>``) only
    with the promoters they were made from (others may differ in length, which would separate them)."""
    made_from, derived, _ = negative.partition("|")
    return not derived or made_from == positive


def _metrics(labels: np.ndarray, probabilities: np.ndarray, threshold: float) -> dict[str, float]:
    metrics = promoter_metrics(labels, probabilities, threshold)
    metrics["ece"] = expected_calibration_error(labels, probabilities)
    return metrics


def format_pair_table(model: dict[str, dict[str, dict]], baseline: dict[str, dict[str, dict]]) -> str:
    """A Markdown table of F1 / AUROC / MCC / ECE per split and source pair, model next to baseline.

    Args:
        model: ``{split: pair_metrics(...)}`` of the model.
        baseline: ``{split: pair_metrics(...)}`` of the k-mer baseline on the same records.
    """
    lines = [
        "| split | promoters vs non-promoters | n | F1 | AUROC | MCC | ECE | k-mer F1 | k-mer AUROC | k-mer MCC "
        "| k-mer ECE |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for split, pairs in model.items():
        for pair, metrics in pairs.items():
            other = baseline[split][pair]
            cells = [metrics[k] for k in ("f1", "auroc", "mcc", "ece")] + [
                other[k] for k in ("f1", "auroc", "mcc", "ece")]
            name = pair.replace("|", "\\|")  # derived sources are named <source>|<method>
            lines.append(
                f"| {split} | {name} | {metrics['n']:,} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return "\n".join(lines)
