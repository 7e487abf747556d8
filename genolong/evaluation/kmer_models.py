"""The k-mer baseline of every problem type, and its stack with the network (docs/guide/tasks.md).

The model (:data:`MODEL_KIND`; multi-label: one ridge solve, clipped predictions read as
probabilities) is fitted on the training split over every ACGT k-mer, its C chosen on validation by
:data:`genolong.evaluation.task_metrics.METRICS` (multi-label: fixed). :func:`fit_stack` keeps, per
output (multi-class: per task), the best on validation of the k-mer model, the network and their
stack (scored out of fold), the first on a tie; with too few rows for two folds, one model alone."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.pipeline import Pipeline

from genolong.classifier.kmer_component import KmerComponent, clipped_logit, log_softmax
from genolong.dna.sequence import BASES
from genolong.evaluation.kmer_baseline import KmerBaselineConfig, kmer_features
from genolong.evaluation.task_metrics import METRICS, correlation, task_metrics

#: The k-mer model of each problem type.
MODEL_KIND = {"binary": "logistic regression", "multiclass": "multinomial logistic regression",
              "multilabel": "one-vs-rest ridge regression on 0/1 labels", "regression": "ridge regression"}
#: Folds and seeded repeats of the stack's out-of-fold score on the validation split.
STACK_FOLDS, STACK_REPEATS = 5, 3
#: What an output of the saved model can be, in the order that wins a tie.
CANDIDATES = ("k-mer model", "network", "stack")
#: The ``a, b, c`` weights of the two models alone.
ALONE = {"k-mer model": (0.0, 1.0, 0.0), "network": (1.0, 0.0, 0.0)}
#: The metric each output's candidates are compared by.
SCORED = {"binary": "AUROC", "multilabel": "AUROC", "regression": "Pearson r", "multiclass": "macro-F1"}
#: The link that turns the k-mer model's scores into its logits, by problem type.
LINK = {"binary": "linear", "regression": "linear", "multilabel": "clipped_logit", "multiclass": "log_softmax"}


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
        return clipped_logit(values) if self.problem_type == "multilabel" else values

    def linear(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The k-mers (V,), weights (M, V) on their frequencies and biases (M,), one row per score (binary:
        one; multi-class: one per class, two classes as ``[0, score]``; ridge: one per output)."""
        vocabulary = self.features.named_steps["kmer_counts"].vocabulary_
        kmers = sorted(vocabulary, key=vocabulary.get)
        weights = np.atleast_2d(self.model.coef_) / self.features.named_steps["scale"].scale_
        bias = np.atleast_1d(np.asarray(self.model.intercept_, dtype=np.float64))
        if self.problem_type == "multiclass" and len(weights) == 1:
            weights, bias = np.vstack([np.zeros_like(weights), weights]), np.r_[0.0, bias]
        return kmers, weights, bias

    def component(self) -> KmerComponent:
        """The model alone as a classifier's k-mer component (unit mix, no offset, no network), whose
        logits are :meth:`logits`' up to float rounding."""
        kmers, weights, bias = self.linear()
        return KmerComponent(kmers, weights, bias, np.eye(len(weights)), LINK[self.problem_type])


def activate(problem_type: str, logits: np.ndarray) -> np.ndarray:
    """Outputs from logits (N, C), as the network's: sigmoid, softmax or the values."""
    if problem_type in ("binary", "multilabel"):
        return 1 / (1 + np.exp(-logits))
    if problem_type == "multiclass":
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)
    return logits


def fit_kmer_model(problem_type: str, train: tuple[list[str], np.ndarray], valid: tuple[list[str], np.ndarray],
                   config: KmerModelConfig = KmerModelConfig()) -> tuple[KmerModel, dict]:
    """The k-mer model of ``problem_type`` fitted on ``train`` (sequences, targets (N, K)), C chosen on
    ``valid``, and a report: the model kind, the chosen ``C``, the features, each ``C``'s valid metric."""
    sizes = range(config.kmers.k_min, config.kmers.k_max + 1)
    acgt = ["".join(kmer) for k in sizes for kmer in itertools.product(BASES, repeat=k)]
    features = kmer_features(config.kmers, {kmer: column for column, kmer in enumerate(acgt)})
    sequences, y = train
    x_train = features.fit_transform(sequences)
    candidates = (config.multilabel_C,) if problem_type == "multilabel" else config.kmers.Cs
    fitted, scores = {}, {}
    for c in candidates:
        if problem_type in ("binary", "multiclass"):
            model = LogisticRegression(C=c, max_iter=config.kmers.max_iter).fit(x_train, y[:, 0].astype(int))
        else:
            model = Ridge(alpha=1 / c).fit(x_train, y)
        fitted[c] = KmerModel(problem_type, features, model, C=c)
        outputs = activate(problem_type, fitted[c].logits(valid[0]))
        scores[c] = task_metrics(problem_type, valid[1], outputs)[METRICS[problem_type].monitor]
    best = max(candidates, key=lambda c: (np.nan_to_num(scores[c], nan=-np.inf), -c))
    report = {"model": MODEL_KIND[problem_type], "C": float(best), "features": int(x_train.shape[1]),
              "valid_" + METRICS[problem_type].monitor + "_by_C": {str(c): float(s) for c, s in scores.items()}}
    return fitted[best], report


class Stack:
    """The network's and the k-mer model's logits combined by ``weights`` (C, 3) ``a, b, c`` per output
    or by ``multinomial`` (multi-class, on both log-probabilities); ``chosen`` (C,) (multi-class: (1,))
    :data:`CANDIDATES` and ``scores``, each candidate's validation score per output."""

    def __init__(self, problem_type: str, weights: np.ndarray | None, multinomial, chosen: list[str],
                 scores: list[dict[str, float]]):
        self.problem_type, self.weights, self.multinomial = problem_type, weights, multinomial
        self.chosen, self.scores = chosen, scores

    def logits(self, network: np.ndarray, kmer: np.ndarray) -> np.ndarray:
        """(N, C) stacked logits from the network's and the k-mer model's logits, both (N, C)."""
        if self.multinomial is not None:
            return self.multinomial.predict_log_proba(np.hstack([log_softmax(network), kmer]))
        return self.weights[:, 0] * network + self.weights[:, 1] * kmer + self.weights[:, 2]

    def saved(self, kmer_model: KmerModel) -> KmerComponent | None:
        """The k-mer component that turns the network's logits into the stack's (``network = diag(a)``,
        ``mix = diag(b)``, ``offset = c``, or the multinomial's), None if the k-mer model has no weight."""
        kmers, weights, bias = kmer_model.linear()
        if self.multinomial is not None:
            coef, outputs = self.multinomial.coef_, len(self.multinomial.intercept_)  # (C, 2C): network, k-mer
            return KmerComponent(kmers, weights, bias, coef[:, outputs:], "log_softmax", self.multinomial.intercept_,
                                 coef[:, :outputs], "log_softmax")
        a, b, c = self.weights.T
        if not b.any():
            return None
        return KmerComponent(kmers, weights, bias, np.diag(b), LINK[self.problem_type], c, np.diag(a))

    def label(self) -> str:
        """What the saved model is: ``k-mer model``, ``network``, ``network + k-mer stack``, or per
        output ``k-mer model 3, stack 2`` when outputs differ."""
        if len(set(self.chosen)) == 1:
            return "network + k-mer stack" if self.chosen[0] == "stack" else self.chosen[0]
        return "per output: " + ", ".join(f"{name} {self.chosen.count(name)}" for name in CANDIDATES
                                          if name in self.chosen)

    def describe(self) -> dict:
        if self.problem_type == "multiclass":
            summary = {"method": "multinomial logistic regression on both models' log-probabilities, fitted on valid"}
        else:
            method = "least squares" if self.problem_type == "regression" else "logistic regression"
            summary = {"method": f"per output a * network + b * kmer + c by {method}, fitted on valid"}
        summary["chosen_by"] = (f"the validation {SCORED[self.problem_type]} of the k-mer model, the network "
                                f"and the stack ({STACK_FOLDS}-fold out of fold, {STACK_REPEATS} repeats)")
        summary["kept"] = {name: self.chosen.count(name) for name in CANDIDATES if name in self.chosen}
        if len(self.chosen) == 1:
            summary["validation_scores"] = self.scores[0]
            if self.weights is not None:
                summary |= dict(zip(("network_weight", "kmer_weight", "offset"), map(float, self.weights[0]),
                                    strict=True))
        return summary


def fit_stack(problem_type: str, network: np.ndarray, kmer: np.ndarray, targets: np.ndarray,
              seed: int = 0) -> Stack:
    """The saved combination of the network's and the k-mer model's validation logits (N, C) on ``targets``
    (N, K) (``seed``: the folds); an output whose targets have a single class keeps the network alone."""
    if problem_type == "multiclass":
        return _fit_multiclass(network, kmer, targets, seed)
    weights = np.tile(ALONE["network"], (network.shape[1], 1))
    chosen, scores = [], []
    for j in range(network.shape[1]):
        x, y = np.stack([network[:, j], kmer[:, j]], axis=1), targets[:, j]
        fitted = _fit_output(problem_type, x, y)
        if fitted is None:
            chosen.append("network")
            scores.append({})
            continue
        score = {"k-mer model": _score(problem_type, y, kmer[:, j]), "network": _score(problem_type, y, network[:, j]),
                 "stack": _out_of_fold(_folds(problem_type, y, seed), (len(y),),
                                       functools.partial(_predict_output, problem_type, x, y),
                                       functools.partial(_score, problem_type, y))}
        best = _best(score)
        weights[j] = fitted if best == "stack" else ALONE[best]
        chosen.append(best)
        scores.append({name: float(value) for name, value in score.items()})
    return Stack(problem_type, weights, None, chosen, scores)


def _fit_output(problem_type: str, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """``a, b, c`` of one output's stack on x (N, 2) ``[network, kmer]``; None for a single class."""
    if problem_type == "regression":
        fit = LinearRegression().fit(x, y)
        return np.array([*fit.coef_, fit.intercept_])
    if not 0 < y.sum() < len(y):
        return None
    fit = LogisticRegression(C=1e4, max_iter=2000).fit(x, y.astype(int))
    return np.array([*fit.coef_[0], fit.intercept_[0]])


def _predict_output(problem_type: str, x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray):
    """One output's stack fitted on the ``train`` rows of x (N, 2) ``[network, kmer]``, applied to the ``test`` rows."""
    a, b, c = _fit_output(problem_type, x[train], y[train])
    return a * x[test, 0] + b * x[test, 1] + c


def _score(problem_type: str, y: np.ndarray, logits: np.ndarray) -> float:
    """One output's metric (:data:`SCORED`): AUROC of its logits, or Pearson r of its values."""
    if problem_type == "regression":
        return correlation(y, logits)
    return float(roc_auc_score(y.astype(int), logits))


def _folds(problem_type: str, y: np.ndarray, seed: int):
    """Seeded (train, held-out) index pairs: stratified for classes, :data:`STACK_REPEATS` times;
    empty when there are too few rows for two folds."""
    if problem_type == "regression":
        count, splitter, groups = min(STACK_FOLDS, len(y) // 2), KFold, None
    else:
        count, splitter, groups = min(STACK_FOLDS, int(np.bincount(y.astype(int)).min())), StratifiedKFold, y.astype(int)
    if count < 2:
        return []
    return [list(splitter(count, shuffle=True, random_state=seed + r).split(np.zeros(len(y)), groups))
            for r in range(STACK_REPEATS)]


def _out_of_fold(repeats: list, shape: tuple[int, ...], predict, score) -> float:
    """The mean over ``repeats`` (:func:`_folds`) of ``score(held_out)``, ``held_out`` (``shape``) holding
    each fold's ``predict(train, test)``, fitted on the other folds; NaN without repeats."""
    values = []
    for folds in repeats:
        held_out = np.zeros(shape)
        for train, test in folds:
            held_out[test] = predict(train, test)
        values.append(score(held_out))
    return float(np.mean(values)) if values else np.nan


def _best(score: dict[str, float]) -> str:
    """The candidate of the highest score, the first of :data:`CANDIDATES` on a tie (NaN loses)."""
    return max(CANDIDATES, key=lambda name: np.nan_to_num(score[name], nan=-np.inf))


def _fit_multiclass(network: np.ndarray, kmer: np.ndarray, targets: np.ndarray, seed: int) -> Stack:
    """Multi-class: the multinomial stack on ``[log_softmax(network), kmer]``, the k-mer model or the network."""
    classes = network.shape[1]
    y = targets[:, 0].astype(int)
    x = np.hstack([log_softmax(network), kmer])
    if len(np.unique(y)) < classes:
        return Stack("multiclass", np.tile(ALONE["network"], (classes, 1)), None, ["network"], [{}])

    def fit(rows):
        return LogisticRegression(C=1.0, max_iter=2000).fit(x[rows], y[rows])

    def macro_f1(log_probabilities):
        return task_metrics("multiclass", targets, np.exp(log_probabilities))["macro_f1"]

    # every class is in every training part of the stratified folds
    stack = _out_of_fold(_folds("multiclass", y, seed), (len(y), classes),
                         lambda train, test: fit(train).predict_log_proba(x[test]), macro_f1)
    score = {"k-mer model": macro_f1(kmer), "network": macro_f1(log_softmax(network)), "stack": stack}
    best = _best(score)
    scores = [{name: float(value) for name, value in score.items()}]
    if best == "stack":
        return Stack("multiclass", None, fit(slice(None)), [best], scores)
    return Stack("multiclass", np.tile(ALONE[best], (classes, 1)), None, [best], scores)
