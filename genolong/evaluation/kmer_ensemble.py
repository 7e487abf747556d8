"""A fine-tuned promoter classifier and k-mer models as one model, stacked on held-out data.

Each kind of negative asks a different question: real non-promoters (promoter or not?),
substitution negatives (is part of this random sequence?) and shuffle negatives (are the motifs
out of place?). A model fitted on them all together trades one against the others; a k-mer
model fitted on one kind answers its question well (on mouse DBTSS promoters, which it never
saw, the substitution expert ranks substitution negatives better than the network does).
:func:`fit_kmer_ensemble`

1. fits one k-mer logistic regression per kind of negative in the training split: the
   promoters against that kind only (:func:`negative_kind`; its ``C`` chosen on the validation
   records of that kind, :func:`genolong.evaluation.kmer_baseline.fit_kmer_baseline`), all on
   the k-mers of the whole training split;
2. scores the validation split with the network and every expert (the experts read the bases
   the network reads; a record longer than the network's window is scored in each window
   ``predict-promoter`` would scan, every window with the record's label and a share of its weight);
3. fits ``sigmoid(a * network logit + sum_e c_e * log sigmoid(expert_e logit) + b)`` on it by
   logistic regression with non-negative weights
   (:func:`genolong.evaluation.calibration.fit_logit_stack`), every validation source weighing
   the same (:func:`genolong.evaluation.cross_source.source_balanced_weights`): one fit weighs
   the models and calibrates their sum (a model that ranks the validation sources backwards gets
   weight 0; when all of them do, the classifier is left as it is, without a k-mer component).
   Through the log-sigmoid an expert can only lower the logit, when it recognises a negative of
   its kind: it vetoes, and does not vouch for a sequence because it is unlike that kind (added
   linearly, the substitution and shuffle experts also raise real non-promoters that carry
   promoter-like k-mers, such as a TATA box; README.md has the numbers);
4. folds ``a`` and ``b`` into the network's output layer and the experts, with their weights
   ``c``, into a :class:`~genolong.classifier.kmer_component.KmerComponent` (log-sigmoid link)
   that the classifier adds.

The result is an ordinary classifier directory (``Classifier.save``) that every command loads.
:func:`score_splits` then chooses its threshold on validation and scores every split per
source pair, on data that neither the fit nor the threshold saw (``test``, ``random_test``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from genolong.classifier.directory import Classifier
from genolong.classifier.kmer_component import KmerComponent
from genolong.classifier.records import (
    best_per_record,
    best_window_probabilities,
    record_stride,
    record_windows,
)
from genolong.datasets.promoter import PromoterRecord
from genolong.evaluation.calibration import BackwardsRanking, fit_logit_stack, fold_into_head
from genolong.evaluation.cross_source import pair_metrics, source_balanced_weights
from genolong.evaluation.kmer_baseline import KmerBaselineConfig, fit_kmer_baseline, kmer_features
from genolong.evaluation.metrics import best_f1_threshold, expected_calibration_error, promoter_metrics

METHOD = (
    "logistic regression (non-negative weights, every validation source weighing the same) on the network "
    "logit and the log-sigmoid of one k-mer expert per kind of negative, on valid; folded into the output "
    "layer and the k-mer component"
)
#: The kind of a real non-promoter (a file of them or genomic background); derived negatives are of their method's.
REAL = "real"


def negative_kind(record: PromoterRecord) -> str:
    """``real``, or the method a derived negative was made by (its source is ``<promoters>|<method>``)."""
    return record.source.partition("|")[2] or REAL


def fit_kmer_experts(
    train: Sequence[PromoterRecord], valid: Sequence[PromoterRecord], config: KmerBaselineConfig
) -> dict[str, object]:
    """One fitted k-mer baseline pipeline per kind of negative in ``train``: ``{kind: pipeline}``.

    Each is fitted on all promoters and the negatives of its kind, on the k-mers of all of
    ``train``; its ``C`` is chosen on the promoters and that kind's negatives of ``valid`` (all of
    ``valid`` when it holds none of that kind).
    """
    counts = kmer_features(config).named_steps["kmer_counts"]  # only the counting step: the k-mers seen
    vocabulary = counts.fit([r.sequence for r in train]).vocabulary_
    kinds = sorted({negative_kind(r) for r in train if r.label == 0})
    experts = {}
    for kind in kinds:
        expert_train = [r for r in train if r.label == 1 or negative_kind(r) == kind]
        expert_valid = [r for r in valid if r.label == 1 or negative_kind(r) == kind]
        if all(r.label == 1 for r in expert_valid):
            expert_valid = list(valid)
        experts[kind], _ = fit_kmer_baseline(expert_train, expert_valid, config, vocabulary)
    return experts


def fit_kmer_ensemble(
    classifier: Classifier,
    train: Sequence[PromoterRecord],
    valid: Sequence[PromoterRecord],
    config: KmerBaselineConfig | None = None,
    batch_size: int = 256,
) -> dict:
    """Add the k-mer experts to ``classifier`` (in place) and calibrate the sum on ``valid``.

    Args:
        classifier: a single-output promoter classifier without a k-mer component.
        train: the records the experts are fitted on (the network's training split).
        valid: held-out records (other sources) for each expert's ``C``, the weights and the offset.
        config: the experts' k-mer sizes and ``C`` candidates (default: the baseline's).

    Returns:
        A JSON-ready record: ``network_weight`` (a), ``expert_weights`` (c per kind of negative),
        ``offset`` (b), each expert's ``C``, the feature count, and the validation ECE of the
        network alone. When every model ranks ``valid`` backwards, ``method`` says so, the
        weights are ``a = 1``, ``c = 0``, ``b = 0`` and the classifier is unchanged.
    """
    if classifier.kmer is not None or len(classifier.info.label_names) != 1:
        raise ValueError("fit_kmer_ensemble takes a one-output classifier without a k-mer component")
    experts = fit_kmer_experts(train, valid, config or KmerBaselineConfig())
    component = KmerComponent.from_pipelines(list(experts.values()), link="logsigmoid").bind(classifier.tokenizer)
    logits, record = _network_and_expert_logits(classifier, component, [r.sequence for r in valid], batch_size)
    labels = np.array([r.label for r in valid])
    record_weights = source_balanced_weights(labels, [r.source for r in valid]) / np.bincount(record)
    try:
        weights, offset = fit_logit_stack(logits, labels[record], record_weights[record])
        method = METHOD
    except BackwardsRanking as err:
        weights, offset, method = np.r_[1.0, np.zeros(len(experts))], 0.0, f"none, the network as trained: {err}"
    network_logits = best_per_record(logits[:, 0], record, len(valid))
    fold_into_head(classifier.model.classifier.classifier, float(weights[0]), offset)
    kept = weights[1:] > 0
    classifier.kmer = (
        KmerComponent(component.kmers, component.weights[kept], component.bias[kept], weights[1:][kept], "logsigmoid")
        .bind(classifier.tokenizer) if kept.any() else None
    )
    return {
        "method": method,
        "network_weight": float(weights[0]),
        "expert_weights": {kind: float(w) for kind, w in zip(experts, weights[1:], strict=True)},
        "offset": offset,
        "expert_C": {kind: float(p.named_steps["logistic"].C) for kind, p in experts.items()},
        "kmer_features": len(component.kmers),
        "valid_ece_network": expected_calibration_error(labels, 1 / (1 + np.exp(-network_logits))),
    }


def _network_and_expert_logits(
    classifier: Classifier, experts: KmerComponent, sequences: list[str], batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The network's logit and each expert's linked score on every window the classifier scores of
    ``sequences`` (one per sequence no longer than its window; :func:`record_windows`), and the
    sequence of each window: shapes ``(W, 1 + E)`` and ``(W,)``. The stacking gives a sequence's
    windows its label and shares its weight among them."""
    window = classifier.info.window_bp
    windows, record = record_windows(sequences, window, record_stride(window))
    rows = []
    for start in range(0, len(windows), batch_size):
        encoded = classifier.encode(windows[start : start + batch_size])
        network = classifier.token_logits(encoded)[:, 0].cpu().numpy()
        rows.append(np.column_stack([network, experts.linked(experts.token_scores(encoded["input_ids"]))]))
    return np.concatenate(rows), record


def score_splits(
    classifier: Classifier, splits: dict[str, Sequence[PromoterRecord]], batch_size: int = 256
) -> dict:
    """The F1-best threshold on ``splits["valid"]``; the metrics of every split, overall and per source pair,
    each record scored as ``predict-promoter`` scores it (its best window when longer than the model's).

    Returns:
        ``threshold``, ``valid`` and ``test`` metrics (:func:`promoter_metrics`) and ``by_source``:
        ``{split: pair_metrics(...)}`` for every split but ``train``.
    """
    scores = {
        name: (
            np.array([r.label for r in records]),
            best_window_probabilities(classifier, [r.sequence for r in records], batch_size,
                                      classifier.info.window_bp)[:, 0],
        )
        for name, records in splits.items()
        if name != "train"
    }
    threshold = best_f1_threshold(*scores["valid"])
    return {
        "threshold": threshold,
        "threshold_chosen_on": "valid (max F1)",
        "valid": promoter_metrics(*scores["valid"], threshold),
        "test": promoter_metrics(*scores["test"], threshold),
        "by_source": {
            name: pair_metrics(labels, probabilities, threshold, [r.source for r in splits[name]])
            for name in ("test", "valid", "random_test")
            if name in scores
            for labels, probabilities in [scores[name]]
        },
    }
