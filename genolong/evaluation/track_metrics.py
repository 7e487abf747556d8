"""Per-track scores of coverage predictions, streamed chunk by chunk.

Per track, over all bins fed: Pearson r of log(1 + value) (the field's score, as Basenji, Enformer and
Borzoi report it) and of the raw values, and R^2 of log(1 + value) (1 - residual / total sum of squares
around the measured mean). A track whose measured or predicted bins are all equal has no Pearson r: it
is None (NaN) there and left out of the means and medians, which say how many tracks they cover.
Moments are merged chunk by chunk (Chan, Golub and LeVeque 1979), so memory holds one chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The scores of each track, in report order.
SCORES = ("pearson_log1p", "pearson_raw", "r2_log1p")


class _Moments:
    """Running count, means, centred second moments and co-moment of paired columns ``(rows, T)``."""

    def __init__(self, tracks: int):
        self.n = 0
        self.mean_x, self.mean_y = np.zeros(tracks), np.zeros(tracks)
        self.m2_x, self.m2_y, self.c_xy = np.zeros(tracks), np.zeros(tracks), np.zeros(tracks)

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        n_b = len(x)
        if n_b == 0:
            return
        mean_x, mean_y = x.mean(axis=0), y.mean(axis=0)
        dx, dy = x - mean_x, y - mean_y
        m2_x, m2_y, c_xy = (dx * dx).sum(axis=0), (dy * dy).sum(axis=0), (dx * dy).sum(axis=0)
        n = self.n + n_b
        delta_x, delta_y = mean_x - self.mean_x, mean_y - self.mean_y
        weight = self.n * n_b / n
        self.m2_x += m2_x + delta_x * delta_x * weight
        self.m2_y += m2_y + delta_y * delta_y * weight
        self.c_xy += c_xy + delta_x * delta_y * weight
        self.mean_x += delta_x * n_b / n
        self.mean_y += delta_y * n_b / n
        self.n = n

    def varies(self, m2: np.ndarray, mean: np.ndarray) -> np.ndarray:
        """Whether a column varies beyond the rounding of merged moments (a constant one is left ~1e-30)."""
        return m2 > 1e-12 * self.n * np.maximum(mean * mean, 1e-30)

    def pearson(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = self.c_xy / np.sqrt(self.m2_x * self.m2_y)
        return np.where(self.varies(self.m2_x, self.mean_x) & self.varies(self.m2_y, self.mean_y), r, np.nan)


class TrackMetricAccumulator:
    """Per-track scores of measured against predicted coverage, fed chunk by chunk.

    Args:
        tracks: the number of tracks ``T``.
    """

    def __init__(self, tracks: int):
        self.tracks = tracks
        self._log, self._raw = _Moments(tracks), _Moments(tracks)
        self._residual = np.zeros(tracks)

    def add(self, measured: np.ndarray, predicted: np.ndarray, *, predicted_log1p: np.ndarray | None = None) -> None:
        """Add a chunk: ``measured`` and ``predicted`` ``(..., T)`` in the dataset's units (coverage, >= 0:
        a negative prediction counts as 0 on the log scale). ``predicted_log1p``: the prediction on the log
        scale when the model made it there (a ridge on log1p values), used as given."""
        measured = np.asarray(measured, dtype=np.float64).reshape(-1, self.tracks)
        predicted = np.asarray(predicted, dtype=np.float64).reshape(-1, self.tracks)
        log_measured = np.log1p(np.maximum(measured, 0))
        log_predicted = (np.log1p(np.maximum(predicted, 0)) if predicted_log1p is None else
                         np.asarray(predicted_log1p, dtype=np.float64).reshape(-1, self.tracks))
        self._log.add(log_measured, log_predicted)
        self._raw.add(measured, predicted)
        self._residual += ((log_measured - log_predicted) ** 2).sum(axis=0)

    def result(self, groups: Sequence[str], identifiers: Sequence[str] | None = None) -> dict:
        """The scores: ``per_track`` (one dict per track: identifier when given, group and :data:`SCORES`),
        ``mean`` (of each score over the tracks that have it, and ``tracks``: how many have a Pearson r),
        ``groups`` (per group: ``median_<score>`` and ``tracks``) and ``bins`` (bins per track scored)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = np.where(self._log.varies(self._log.m2_x, self._log.mean_x), 1 - self._residual / self._log.m2_x,
                          np.nan)
        columns = {"pearson_log1p": self._log.pearson(), "pearson_raw": self._raw.pearson(), "r2_log1p": r2}
        per_track = []
        for t in range(self.tracks):
            row = {"identifier": identifiers[t]} if identifiers is not None else {}
            row["group"] = groups[t]
            row.update({score: _number(columns[score][t]) for score in SCORES})
            per_track.append(row)
        grouped = {}
        for group in dict.fromkeys(groups):
            members = [t for t in range(self.tracks) if groups[t] == group]
            grouped[group] = {f"median_{s}": _number(_nan_stat(np.median, columns[s][members])) for s in SCORES}
            grouped[group]["tracks"] = len(members)
        mean = {score: _number(_nan_stat(np.mean, columns[score])) for score in SCORES}
        mean["tracks"] = int(np.isfinite(columns["pearson_log1p"]).sum())
        return {"per_track": per_track, "mean": mean, "groups": grouped, "bins": int(self._log.n)}


def _nan_stat(stat, values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(stat(finite)) if len(finite) else math.nan


def _number(value) -> float | None:
    """A JSON-ready score: NaN (undefined) as None."""
    value = float(value)
    return None if math.isnan(value) else value


def track_metrics(measured: np.ndarray, predicted: np.ndarray, groups: Sequence[str],
                  identifiers: Sequence[str] | None = None) -> dict:
    """:meth:`TrackMetricAccumulator.result` of ``measured`` and ``predicted`` ``(N, bins, T)`` in one chunk."""
    accumulator = TrackMetricAccumulator(np.shape(measured)[-1])
    accumulator.add(measured, predicted)
    return accumulator.result(groups, identifiers)


def annotation_metrics(labels: np.ndarray, probabilities: np.ndarray, class_names: Sequence[str]) -> dict:
    """Per-class scores of per-base (or per-bin) annotation: ``labels`` 0/1 and ``probabilities``
    ``(..., C)``; AUPRC (average precision) and MCC of the calls at probability 0.5. A class whose labels
    are all 0 or all 1 has no AUPRC (None). Returns ``{"per_class": {name: {"auprc", "mcc", "positives"}},
    "mean": {"auprc", "mcc"}}`` (means over the classes that have the score)."""
    from sklearn.metrics import average_precision_score, matthews_corrcoef

    labels = np.asarray(labels).reshape(-1, len(class_names)).astype(bool)
    probabilities = np.asarray(probabilities, dtype=np.float64).reshape(-1, len(class_names))
    per_class = {}
    for c, name in enumerate(class_names):
        truth = labels[:, c]
        defined = 0 < truth.sum() < len(truth)
        per_class[name] = {
            "auprc": float(average_precision_score(truth, probabilities[:, c])) if defined else None,
            "mcc": float(matthews_corrcoef(truth, probabilities[:, c] >= 0.5)), "positives": int(truth.sum())}
    mean = {score: _number(_nan_stat(np.mean, np.array([math.nan if row[score] is None else row[score]
                                                         for row in per_class.values()])))
            for score in ("auprc", "mcc")}
    return {"per_class": per_class, "mean": mean}
