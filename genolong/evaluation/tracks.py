"""The metrics of coverage-track predictions (:mod:`genolong.evaluation.track_metrics`) and the two
baselines every track model is reported beside: a flat one (each track's training mean) and a ridge
regression on the k-mer frequencies of each bin and of the flanks around it
(:mod:`genolong.evaluation.track_kmers`); the figure is :mod:`genolong.evaluation.track_plots`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from genolong.evaluation.track_kmers import fit_kmer_ridges
from genolong.evaluation.track_metrics import (
    SCORES,
    TrackMetricAccumulator,
    annotation_metrics,
    track_metrics,
)
from genolong.evaluation.track_plots import plot_tracks

__all__ = ["SCORES", "TrackMetricAccumulator", "annotation_metrics", "flat_baseline", "kmer_ridge_baseline", "plot_tracks", "track_metrics"]


def _identifiers(dataset) -> list[str]:
    return [str(track["identifier"]) for track in dataset.tracks]


def flat_baseline(dataset, split: str = "test") -> dict:
    """Each track's mean over the training bins (on the log scale) predicted everywhere in ``split`` of
    ``dataset`` (a :class:`~genolong.datasets.tracks.TrackDataset`): its Pearson r is undefined (None,
    ``mean.tracks`` 0); its R^2 says how far the training mean is from the split's. Adds ``train_mean_log1p``."""
    train = dataset.split("train")
    total, count = np.zeros(len(dataset.tracks)), 0
    for i in range(len(train)):
        total += np.log1p(np.maximum(train.targets(i), 0)).sum(axis=0, dtype=np.float64)
        count += dataset.target_bins
    level = total / count
    accumulator = TrackMetricAccumulator(len(dataset.tracks))
    scored = dataset.split(split)
    for i in range(len(scored)):
        measured = scored.targets(i)
        flat = np.broadcast_to(level, measured.shape)
        accumulator.add(measured, np.expm1(flat), predicted_log1p=flat)
    result = accumulator.result(dataset.groups, _identifiers(dataset))
    result["train_mean_log1p"] = level.tolist()
    return result


def kmer_ridge_baseline(dataset, *, k: int = 3, flank_bp: int = 16384, split: str = "test",
                        alphas: Sequence[float] | None = None) -> dict:
    """The task's k-mer baseline on ``split``: ridge regressions of log(1 + value) on the k-mer
    frequencies of each bin (``bin_only``) and of the bin plus its ``flank_bp`` on either side
    (``with_flanks``), each with its ridge penalty chosen on valid and fitted on train
    (:func:`genolong.evaluation.track_kmers.fit_kmer_ridges`). Returns both metric dicts (with ``alpha``)
    and ``options``."""
    models = fit_kmer_ridges(dataset, k=k, flank_bp=flank_bp, alphas=alphas)
    result = {}
    for name, model in models.items():
        accumulator = TrackMetricAccumulator(len(dataset.tracks))
        for measured, log_predicted in model.stream(dataset.split(split)):
            accumulator.add(measured, np.expm1(log_predicted), predicted_log1p=log_predicted)
        result[name] = accumulator.result(dataset.groups, _identifiers(dataset))
        result[name]["alpha"] = model.alpha
    result["options"] = {"k": k, "flank_bp": flank_bp, "split": split, "target": "log1p",
                         "alphas": [float(a) for a in models["bin_only"].alphas], "alpha_chosen_on": "valid",
                         "fit_on": "train"}
    return result
