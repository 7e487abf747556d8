"""Promoter metrics per (promoter source, non-promoter source) pair of a split: one pooled score of a
held-out-source split hides which kind of negatives (real, background, derived) a model fails on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from genolong.evaluation.metrics import expected_calibration_error, promoter_metrics

ALL = "all"


def pair_metrics(labels: Sequence[int], probabilities: np.ndarray, threshold: float,
                 sources: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{"all": metrics, "P vs N": metrics, ...}``: :func:`~genolong.evaluation.metrics.promoter_metrics`
    plus ``ece`` (10 bins) of all records and of each ``<promoter source> vs <non-promoter source>``
    pair (derived negatives only with the promoters they were made from: others may differ in length),
    at one ``threshold`` chosen elsewhere; ``labels``, ``probabilities``, ``sources``: shape ``(n,)``."""
    probabilities = np.asarray(probabilities, dtype=float).ravel()
    labels, sources = np.asarray(labels).astype(int), np.asarray(sources, dtype=object)
    groups = {ALL: np.ones(len(labels), dtype=bool)}
    for positive in sorted(set(sources[labels == 1])):
        for negative in sorted(set(sources[labels == 0])):
            made_from, derived, _ = negative.partition("|")  # a derived negative: <source>|<method>
            if not derived or made_from == positive:
                groups[f"{positive} vs {negative}"] = (sources == positive) | (sources == negative)
    return {name: promoter_metrics(labels[rows], probabilities[rows], threshold)
            | {"ece": expected_calibration_error(labels[rows], probabilities[rows])}
            for name, rows in groups.items()}


def format_pair_table(model: dict[str, dict[str, dict]], baseline: dict[str, dict[str, dict]]) -> str:
    """A Markdown table of F1 / AUROC / MCC / ECE per split and source pair of ``model`` next to
    ``baseline`` (the k-mer baseline on the same records), both ``{split: pair_metrics(...)}``."""
    lines = [
        "| split | promoters vs non-promoters | n | F1 | AUROC | MCC | ECE | k-mer F1 | k-mer AUROC | k-mer MCC "
        "| k-mer ECE |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for split, pairs in model.items():
        for pair, metrics in pairs.items():
            cells = [scores[k] for scores in (metrics, baseline[split][pair])
                     for k in ("f1", "auroc", "mcc", "ece")]
            name = pair.replace("|", "\\|")  # derived sources are named <source>|<method>
            lines.append(
                f"| {split} | {name} | {metrics['n']:,} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return "\n".join(lines)
