"""The k-mer baseline of every problem type, and its stack with the network.

Features are the baseline's (:func:`genolong.evaluation.kmer_baseline.kmer_features`: k-mer
frequencies for k = 4..6, scaled) on the ACGT k-mers only (a k-mer with another letter is not
counted, as the classifier's k-mer component counts them), fitted on exactly the training split; the model by problem
type: ``binary`` logistic regression, ``multiclass`` multinomial logistic regression,
``multilabel`` one-vs-rest least squares (ridge regression on the 0/1 labels, every label in one
solve: hundreds of logistic regressions took tens of minutes on a shared CPU; its clipped
predictions are the labels' probabilities), ``regression`` ridge regression. The regularisation is chosen on
the validation split by the problem type's metric (:data:`genolong.evaluation.task_metrics.MONITOR`),
except for multi-label tasks, which use :attr:`KmerModelConfig.multilabel_C`.

:func:`fit_stack` combines the network's and the k-mer model's logits on the validation split
(the promoter task's technique, :mod:`genolong.evaluation.kmer_ensemble`, for every problem
type): per output ``a * network + b * kmer + c`` by logistic regression (binary, multi-label)
or least squares (regression); for multi-class, a multinomial logistic regression on both
models' log-probabilities.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.pipeline import Pipeline

from genolong.classifier.kmer_component import KmerComponent
from genolong.evaluation.kmer_baseline import KmerBaselineConfig, kmer_features
from genolong.evaluation.task_metrics import MONITOR, task_metrics

#: The k-mer model of each problem type.
MODEL_KIND = {"binary": "logistic regression", "multiclass": "multinomial logistic regression",
              "multilabel": "one-vs-rest ridge regression on 0/1 labels", "regression": "ridge regression"}


@dataclass(frozen=True)
class KmerModelConfig:
    """The baseline's k-mer sizes and C candidates (ridge: alpha = 1 / C), and the multi-label C."""

    kmers: KmerBaselineConfig = KmerBaselineConfig()
    multilabel_C: float = 1e-2


class KmerModel:
    """A fitted k-mer model: ``logits(sequences)`` (N, C) in the network's logit space (binary and
    multi-label: log-odds; multiclass: log-probabilities; regression: values)."""

    def __init__(self, problem_type: str, features: Pipeline, model, C: float):
        self.problem_type, self.features, self.model, self.C = problem_type, features, model, C

    def logits(self, sequences: list[str]) -> np.ndarray:
        x = self.features.transform(sequences)
        if self.problem_type == "multiclass":
            return self.model.predict_log_proba(x)
        if self.problem_type == "binary":
            return self.model.decision_function(x).reshape(len(sequences), 1)
        values = np.asarray(self.model.predict(x), dtype=np.float64).reshape(len(sequences), -1)
        if self.problem_type == "regression":
            return values
        if self.problem_type == "multilabel":
            values = np.clip(values, 1e-4, 1 - 1e-4)
            return np.log(values / (1 - values))
        return values

    def linear(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The model as weights on k-mer frequencies: the k-mers (V,), weights (M, V) and biases
        (M,), one row per score (binary: one; multi-class: one per class, a two-class model's
        as ``[0, score]``; ridge: one per output); see
        :class:`~genolong.classifier.kmer_component.KmerComponent`."""
        vocabulary = self.features.named_steps["kmer_counts"].vocabulary_
        kmers = sorted(vocabulary, key=vocabulary.get)
        weights = np.atleast_2d(self.model.coef_) / self.features.named_steps["scale"].scale_
        bias = np.atleast_1d(np.asarray(self.model.intercept_, dtype=np.float64))
        if self.problem_type == "multiclass" and len(weights) == 1:
            weights, bias = np.vstack([np.zeros_like(weights), weights]), np.r_[0.0, bias]
        return kmers, weights, bias


def activate(problem_type: str, logits: np.ndarray) -> np.ndarray:
    """Outputs from logits (N, C), as the network's: sigmoid, softmax or the values."""
    if problem_type in ("binary", "multilabel"):
        return 1 / (1 + np.exp(-logits))
    if problem_type == "multiclass":
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)
    return logits


def _fit(problem_type: str, x, targets: np.ndarray, C: float, max_iter: int):
    if problem_type in ("binary", "multiclass"):
        return LogisticRegression(C=C, max_iter=max_iter).fit(x, targets[:, 0].astype(int))
    return Ridge(alpha=1 / C).fit(x, targets)


def fit_kmer_model(problem_type: str, train: tuple[list[str], np.ndarray], valid: tuple[list[str], np.ndarray],
                   config: KmerModelConfig = KmerModelConfig()) -> tuple[KmerModel, dict]:
    """Fit the k-mer model of ``problem_type`` on ``train`` (sequences, targets (N, K)); choose C on ``valid``.

    Returns:
        The model and a report: the model kind, the chosen ``C``, the feature count and the
        validation metric of each ``C`` tried.
    """
    sizes = range(config.kmers.k_min, config.kmers.k_max + 1)
    acgt = ["".join(kmer) for k in sizes for kmer in itertools.product("ACGT", repeat=k)]
    features = kmer_features(config.kmers, {kmer: column for column, kmer in enumerate(acgt)})
    x_train = features.fit_transform(train[0])
    candidates = (config.multilabel_C,) if problem_type == "multilabel" else config.kmers.Cs
    fitted, scores = {}, {}
    for c in candidates:
        fitted[c] = KmerModel(problem_type, features, _fit(problem_type, x_train, train[1], c, config.kmers.max_iter),
                              C=c)
        outputs = activate(problem_type, fitted[c].logits(valid[0]))
        scores[c] = task_metrics(problem_type, valid[1], outputs)[MONITOR[problem_type]]
    best = max(candidates, key=lambda c: (np.nan_to_num(scores[c], nan=-np.inf), -c))
    report = {"model": MODEL_KIND[problem_type], "C": float(best), "features": int(x_train.shape[1]),
              "valid_" + MONITOR[problem_type] + "_by_C": {str(c): float(s) for c, s in scores.items()}}
    return fitted[best], report


class Stack:
    """The network's and the k-mer model's logits combined (see the module docstring).

    Attributes:
        weights: (C, 3) ``a, b, c`` per output (binary, multi-label, regression), or None.
        multinomial: the multi-class logistic regression on ``[network, kmer]`` log-probabilities, or None.
    """

    def __init__(self, problem_type: str, weights: np.ndarray | None, multinomial=None):
        self.problem_type, self.weights, self.multinomial = problem_type, weights, multinomial

    def logits(self, network: np.ndarray, kmer: np.ndarray) -> np.ndarray:
        """(N, C) stacked logits from the network's and the k-mer model's logits, both (N, C)."""
        if self.multinomial is not None:
            return self.multinomial.predict_log_proba(np.hstack([_log_softmax(network), kmer]))
        return self.weights[:, 0] * network + self.weights[:, 1] * kmer + self.weights[:, 2]

    def saved(self, kmer_model: KmerModel) -> KmerComponent | None:
        """The stack as a classifier directory keeps it: the k-mer component that turns the
        network's logits into the stack's (None when the stack gives the k-mer model no weight).

        Binary, multi-label, regression: ``network = diag(a)``, the k-mer model with ``mix = diag(b)``
        (multi-label through the clipped log-odds of its ridge predictions), ``offset = c``;
        multi-class: the multinomial stack's weights on the network's log-probabilities, on the
        k-mer model's (``log_softmax`` of its class scores) and its intercept.
        """
        kmers, weights, bias = kmer_model.linear()
        if self.multinomial is not None:
            coef, outputs = self.multinomial.coef_, len(self.multinomial.intercept_)  # (C, 2C): network, k-mer
            return KmerComponent(kmers, weights, bias, coef[:, outputs:], "log_softmax", self.multinomial.intercept_,
                                 coef[:, :outputs], "log_softmax")
        a, b, c = self.weights.T
        if not b.any():
            return None
        link = "clipped_logit" if self.problem_type == "multilabel" else "linear"
        return KmerComponent(kmers, weights, bias, np.diag(b), link, c, np.diag(a))

    def describe(self) -> dict:
        if self.multinomial is not None:
            return {"method": "multinomial logistic regression on both models' log-probabilities, fitted on valid"}
        method = "least squares" if self.problem_type == "regression" else "logistic regression"
        summary = {"method": f"per output a * network + b * kmer + c by {method}, fitted on valid"}
        if len(self.weights) == 1:
            summary |= dict(zip(("network_weight", "kmer_weight", "offset"), map(float, self.weights[0]), strict=True))
        return summary


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def fit_stack(problem_type: str, network: np.ndarray, kmer: np.ndarray, targets: np.ndarray) -> Stack:
    """The stack of the network's and the k-mer model's validation logits (N, C) on ``targets`` (N, K).

    An output whose validation targets have a single class keeps the network alone (a = 1, b = c = 0).
    """
    if problem_type == "multiclass":
        model = LogisticRegression(C=1.0, max_iter=2000).fit(np.hstack([_log_softmax(network), kmer]),
                                                             targets[:, 0].astype(int))
        if len(model.classes_) == network.shape[1]:
            return Stack(problem_type, None, model)
        return Stack(problem_type, np.tile([1.0, 0.0, 0.0], (network.shape[1], 1)))
    weights = np.tile([1.0, 0.0, 0.0], (network.shape[1], 1))
    for j in range(network.shape[1]):
        x, y = np.stack([network[:, j], kmer[:, j]], axis=1), targets[:, j]
        if problem_type == "regression":
            fit = LinearRegression().fit(x, y)
            weights[j] = [*fit.coef_, fit.intercept_]
        elif 0 < y.sum() < len(y):
            fit = LogisticRegression(C=1e4, max_iter=2000).fit(x, y.astype(int))
            weights[j] = [*fit.coef_[0], fit.intercept_[0]]
    return Stack(problem_type, weights)
