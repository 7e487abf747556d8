"""The k-mer baseline for promoter prediction: the frequencies of each sequence's ACGT k-mers
(:class:`KmerCounts`), standardized without centring (they stay sparse), in an L2 logistic
regression trained on ``train``, its strength (by AUPRC) and threshold (by F1) chosen on ``valid``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

from genolong.core.errors import ConfigError, UserError
from genolong.datasets.promoter import PromoterRecord, load_manifest, load_split
from genolong.dna.kmers import acgt_kmers
from genolong.dna.sequence import BASES
from genolong.evaluation.cross_source import pair_metrics
from genolong.evaluation.metrics import best_f1_threshold, promoter_metrics


@dataclass(frozen=True)
class KmerBaselineConfig:
    """k-mer sizes ``k_min..k_max`` and the candidate inverse L2 strengths ``Cs``; the fit of the best
    validation AUPRC is kept (ties: the stronger regularization)."""

    k_min: int = 4
    k_max: int = 6
    Cs: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    max_iter: int = 2000

    def __post_init__(self):
        if not 1 <= self.k_min <= self.k_max <= 8:
            raise ConfigError(f"k-mer sizes {self.k_min}..{self.k_max} must satisfy 1 <= k_min <= k_max <= 8")
        if not self.Cs or any(c <= 0 for c in self.Cs):
            raise ConfigError(f"C values must be positive, got {list(self.Cs)}")
        object.__setattr__(self, "Cs", tuple(sorted(self.Cs)))


class KmerCounts(TransformerMixin, BaseEstimator):
    """Sequences -> (N, V) sparse float64 counts of their ACGT k-mers, k = ``k_min..k_max`` (other letters,
    lowercase included, break k-mers), of the ``vocabulary`` (k-mer -> column) or, without one, of
    the k-mers seen in fitting, in alphabetical order (``vocabulary_`` after fitting)."""

    def __init__(self, k_min: int, k_max: int, vocabulary: Mapping[str, int] | None = None):
        self.k_min, self.k_max, self.vocabulary = k_min, k_max, vocabulary

    def _keys(self, sequence: str) -> np.ndarray:
        """Each ACGT k-mer of ``sequence`` as ``4^k + number`` (distinct over k), by k, then position."""
        return np.concatenate([4**k + acgt_kmers(sequence, k)[1] for k in range(self.k_min, self.k_max + 1)])

    def fit(self, sequences, y=None) -> KmerCounts:
        self._columns = np.full(2 * 4**self.k_max, -1, dtype=np.int64)  # key -> column, -1: not counted
        if self.vocabulary is None:
            self._sighted = np.full(len(self._columns), -1, dtype=np.int64)  # key -> rank of its first sighting
            for sequence in sequences:
                keys, first = np.unique(self._keys(sequence), return_index=True)
                new = keys[self._sighted[keys] < 0][np.argsort(first[self._sighted[keys] < 0])]
                self._sighted[new] = np.arange(len(new)) + self._sighted.max() + 1
            kmers = sorted(_kmer_text(int(key)) for key in np.flatnonzero(self._sighted >= 0))
            self.vocabulary_ = {kmer: column for column, kmer in enumerate(kmers)}
        else:
            self.vocabulary_ = dict(self.vocabulary)
        for kmer, column in self.vocabulary_.items():
            self._columns[4 ** len(kmer) + acgt_kmers(kmer, len(kmer))[1]] = column
        return self

    def transform(self, sequences) -> sparse.csr_matrix:
        indptr, indices, counts = [0], [], []
        for sequence in sequences:
            columns = self._columns[self._keys(sequence)]
            kept, count = np.unique(columns[columns >= 0], return_counts=True)
            indices.append(kept)
            counts.append(count)
            indptr.append(indptr[-1] + len(kept))
        return sparse.csr_matrix((np.concatenate(counts).astype(np.float64), np.concatenate(indices), indptr),
                                 shape=(len(indptr) - 1, len(self.vocabulary_)))

    def fit_transform(self, sequences, y=None) -> sparse.csr_matrix:
        """:meth:`fit`, then :meth:`transform`; with the k-mers seen in fitting, each row's counts are
        stored in the order the k-mers were first seen, as scikit-learn's ``CountVectorizer`` stores
        them (sums over a row, and so the models fitted on them, are the same to the bit)."""
        counts = self.fit(sequences).transform(sequences)
        if self.vocabulary is not None:
            return counts
        seen = np.flatnonzero(self._sighted >= 0)
        rank = np.empty(len(self.vocabulary_), dtype=np.int64)
        rank[self._columns[seen]] = self._sighted[seen]
        order = np.lexsort((rank[counts.indices], np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))))
        return sparse.csr_matrix((counts.data[order], counts.indices[order], counts.indptr), shape=counts.shape)


def _kmer_text(key: int) -> str:
    """The k-mer of a key ``4^k + number`` (:meth:`KmerCounts._keys`)."""
    k = (key.bit_length() - 1) // 2
    return "".join(BASES[(key >> 2 * (k - 1 - j)) & 3] for j in range(k))


def kmer_features(config: KmerBaselineConfig, vocabulary: Mapping[str, int] | None = None) -> Pipeline:
    """The unfitted feature pipeline: sequences (str) -> standardized frequencies ``(n, n_kmers)`` of the
    k-mers of ``vocabulary`` (k-mer -> column; default: those seen in fitting)."""
    return Pipeline([("kmer_counts", KmerCounts(config.k_min, config.k_max, vocabulary)),
                     ("frequencies", Normalizer(norm="l1")), ("scale", StandardScaler(with_mean=False))])


def fit_kmer_baseline(train: list[PromoterRecord], valid: list[PromoterRecord],
                      config: KmerBaselineConfig = KmerBaselineConfig()) -> tuple[Pipeline, dict]:
    """The pipeline (sequences -> ``predict_proba``) of the features fitted on ``train`` and the
    logistic regression of the ``C`` best on ``valid``, and the validation AUPRC of each ``C``."""
    features = kmer_features(config)
    x_train = features.fit_transform([r.sequence for r in train])
    x_valid = features.transform([r.sequence for r in valid])
    y_train, y_valid = [r.label for r in train], [r.label for r in valid]
    models, valid_auprc = {}, {}
    for c in config.Cs:
        models[c] = LogisticRegression(C=c, max_iter=config.max_iter).fit(x_train, y_train)
        valid_auprc[c] = float(average_precision_score(y_valid, models[c].predict_proba(x_valid)[:, 1]))
    best = max(config.Cs, key=lambda c: (valid_auprc[c], -c))
    return Pipeline([*features.steps, ("logistic", models[best])]), valid_auprc


def run_kmer_baseline(data_dir: str | Path, config: KmerBaselineConfig = KmerBaselineConfig()) -> dict:
    """Fit on train, choose ``C`` and the F1-best threshold on valid, evaluate on test: a JSON-ready report
    (config, ``C``, the dataset's counts and negatives, valid and test metrics, fit time)."""
    manifest = load_manifest(data_dir)
    names = ("train", "valid", "test", *(["random_test"] if "random_test" in manifest["counts"] else []))
    splits = {name: load_split(data_dir, name) for name in names}
    for name, records in splits.items():
        if len({r.label for r in records}) < 2:
            raise UserError(
                f"{data_dir}/{name}.tsv needs both labels for the baseline; it has {len(records)} rows "
                f"with labels {sorted({r.label for r in records})}")
    started = time.perf_counter()
    pipeline, valid_auprc = fit_kmer_baseline(splits["train"], splits["valid"], config)
    fit_seconds = time.perf_counter() - started

    def scores(name: str) -> tuple[list[int], np.ndarray]:
        records = splits[name]
        return [r.label for r in records], pipeline.predict_proba([r.sequence for r in records])[:, 1]

    valid_true, valid_prob = scores("valid")
    threshold = best_f1_threshold(valid_true, valid_prob)
    report = {"model": "kmer-logistic-regression", "config": asdict(config),
              "C": float(pipeline.named_steps["logistic"].C),
              "valid_auprc_by_C": {str(c): v for c, v in valid_auprc.items()},
              "features": len(pipeline.named_steps["kmer_counts"].vocabulary_),
              "data": str(Path(data_dir).resolve()), "negatives": manifest["negatives"]["method"],
              "counts": manifest["counts"], "threshold_chosen_on": "valid (max F1)",
              "valid": promoter_metrics(valid_true, valid_prob, threshold),
              "test": promoter_metrics(*scores("test"), threshold), "fit_seconds": round(fit_seconds, 2)}
    if manifest["split"]["method"] == "source":
        report["by_source"] = {
            name: pair_metrics(*scores(name), threshold, [r.source for r in splits[name]])
            for name in ("test", "valid", "random_test")
        }
    return report
