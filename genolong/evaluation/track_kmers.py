"""The k-mer baseline of a track dataset: ridge regressions of each bin's log(1 + value) on k-mer
frequencies, fitted from sufficient statistics accumulated window by window (memory: one window's
features and a ``features x features`` Gram matrix, whatever the number of windows).

Features of a bin: the frequencies of the ``4**k`` k-mers starting in it (k-mers with an N are not
counted), and, with flanks, the same over the bin and ``flank_bp`` on either side (clipped to the
window), after the bin's own. Features are standardised on train; the ridge penalty ``alpha * n``
(``n`` training bins) is chosen among ``alphas`` by the mean per-track Pearson r of log(1 + value) on
valid, the model fitted on train.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from genolong.core.errors import ConfigError
from genolong.evaluation.track_metrics import TrackMetricAccumulator

#: Ridge penalties tried, per training bin of standardised features.
DEFAULT_ALPHAS = tuple(float(a) for a in np.logspace(-6, 3, 10))


@dataclass(frozen=True)
class KmerFeatures:
    """The k-mer features of a dataset's windows (its geometry: ``bin_bp``, ``target_offset_bp``,
    ``target_bins``)."""

    k: int
    bin_bp: int
    target_offset_bp: int
    target_bins: int
    flank_bp: int

    def __post_init__(self):
        if self.k < 1 or self.flank_bp < 0 or self.flank_bp % self.bin_bp:
            raise ConfigError(f"k-mer baseline: k must be >= 1 and flank_bp ({self.flank_bp}) a multiple of the "
                              f"bin size ({self.bin_bp})")

    def __call__(self, codes: np.ndarray) -> np.ndarray:
        """``(target_bins, 2 * 4**k)`` float64: each bin's k-mer frequencies, then its flanks' (bin included)."""
        codes = np.asarray(codes)
        kmers, length = 4 ** self.k, len(codes)
        starts = length - self.k + 1
        ids, ok = np.zeros(starts, dtype=np.int64), np.ones(starts, dtype=bool)
        for j in range(self.k):
            part = codes[j:j + starts]
            ok &= part < 4
            ids = ids * 4 + np.where(part < 4, part, 0)
        lead = -(-self.target_offset_bp // self.bin_bp)  # chunks before the first bin
        chunk = (np.arange(starts) - self.target_offset_bp) // self.bin_bp + lead
        chunks = int(chunk[-1]) + 1
        counts = np.bincount(chunk[ok] * kmers + ids[ok], minlength=chunks * kmers).reshape(chunks, kmers)
        own = counts[lead:lead + self.target_bins].astype(np.float64)
        cumulative = np.vstack([np.zeros((1, kmers), np.int64), np.cumsum(counts, axis=0)])
        centre = lead + np.arange(self.target_bins)
        reach = self.flank_bp // self.bin_bp
        low, high = np.maximum(centre - reach, 0), np.minimum(centre + 1 + reach, chunks)
        around = (cumulative[high] - cumulative[low]).astype(np.float64)
        return np.hstack([_frequencies(own), _frequencies(around)])


def _frequencies(counts: np.ndarray) -> np.ndarray:
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)


@dataclass
class KmerRidge:
    """One fitted ridge: ``columns`` of :class:`KmerFeatures` used, ``coef`` ``(F, T)``, ``intercept``
    ``(T,)``, on the log(1 + value) scale; ``alpha`` chosen among ``alphas``."""

    features: KmerFeatures
    columns: slice
    coef: np.ndarray
    intercept: np.ndarray
    alpha: float
    alphas: tuple[float, ...]

    def predict_log1p(self, codes: np.ndarray) -> np.ndarray:
        """``(target_bins, T)`` predicted log(1 + value) of one window's codes."""
        return self.features(codes)[:, self.columns] @ self.coef + self.intercept

    def stream(self, split) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(measured, predicted log1p)`` of each window of ``split``, each ``(target_bins, T)``."""
        for i in range(len(split)):
            yield split.targets(i), self.predict_log1p(split.codes(i))


class _Gram:
    """Sums over training bins: ``n``, ``x``, ``x x^T``, ``y``, ``x y^T``."""

    def __init__(self, features: int, tracks: int):
        self.n = 0
        self.x, self.xx = np.zeros(features), np.zeros((features, features))
        self.y, self.xy = np.zeros(tracks), np.zeros((features, tracks))

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        self.n += len(x)
        self.x += x.sum(axis=0)
        self.xx += x.T @ x
        self.y += y.sum(axis=0)
        self.xy += x.T @ y

    def solve(self, columns: slice, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """Ridge coefficients ``(F, T)`` and intercept on standardised ``columns`` with penalty ``alpha * n``."""
        mean_x, mean_y = self.x[columns] / self.n, self.y / self.n
        cov = self.xx[columns, columns] - self.n * np.outer(mean_x, mean_x)
        cross = self.xy[columns] - self.n * np.outer(mean_x, mean_y)
        scale = np.sqrt(np.maximum(np.diag(cov), 0) / self.n)
        scale[scale == 0] = 1.0
        system = cov / np.outer(scale, scale) + alpha * self.n * np.eye(len(scale))
        coef = np.linalg.solve(system, cross / scale[:, None]) / scale[:, None]
        return coef, mean_y - mean_x @ coef


def fit_kmer_ridges(dataset, *, k: int = 3, flank_bp: int = 16384,
                    alphas: Sequence[float] | None = None) -> dict[str, KmerRidge]:
    """``{"bin_only": ..., "with_flanks": ...}`` fitted on ``dataset``'s train split, each ``alpha`` chosen
    on valid (a :class:`~genolong.datasets.tracks.TrackDataset` with both splits)."""
    alphas = tuple(DEFAULT_ALPHAS if alphas is None else alphas)
    features = KmerFeatures(k, dataset.bin_bp, dataset.target_offset_bp, dataset.target_bins, flank_bp)
    kmers, tracks = 4 ** k, len(dataset.tracks)
    gram = _Gram(2 * kmers, tracks)
    train = dataset.split("train")
    for i in range(len(train)):
        gram.add(features(train.codes(i)), np.log1p(np.maximum(train.targets(i), 0)))
    variants = {"bin_only": slice(0, kmers), "with_flanks": slice(0, 2 * kmers)}
    fits = {(name, alpha): gram.solve(columns, alpha) for name, columns in variants.items() for alpha in alphas}
    scores = {key: TrackMetricAccumulator(tracks) for key in fits}
    valid = dataset.split("valid")
    for i in range(len(valid)):
        x, measured = features(valid.codes(i)), valid.targets(i)
        for (name, alpha), (coef, intercept) in fits.items():
            log_predicted = x[:, variants[name]] @ coef + intercept
            scores[name, alpha].add(measured, np.expm1(log_predicted), predicted_log1p=log_predicted)
    models = {}
    for name, columns in variants.items():
        means = {alpha: scores[name, alpha].result(dataset.groups)["mean"]["pearson_log1p"] for alpha in alphas}
        best = max(alphas, key=lambda alpha: -np.inf if means[alpha] is None else means[alpha])
        models[name] = KmerRidge(features, columns, *fits[name, best], alpha=best, alphas=alphas)
    return models
