"""A fine-tuned promoter classifier and the k-mer baseline as one model, stacked on held-out data.

The network and the k-mer logistic regression err on different sequences: on the mouse
held-out-source dataset of the default model, their sum ranks both the validation source and
the random split better than either alone. :func:`fit_kmer_ensemble`

1. fits the k-mer baseline on the training split (its ``C`` chosen on validation,
   :func:`genolong.evaluation.kmer_baseline.fit_kmer_baseline`);
2. scores the validation split with both (the k-mer model reads the bases the network reads);
3. fits ``sigmoid(a * network logit + c * k-mer logit + b)`` on it by logistic regression
   (:func:`genolong.evaluation.calibration.fit_logit_stack`): one fit weighs the two models and
   calibrates their sum (a model that ranks the validation sources backwards gets weight 0);
4. folds ``a`` and ``b`` into the network's output layer and ``c`` into a
   :class:`~genolong.inference.kmer_component.KmerComponent` that the classifier adds.

The result is an ordinary classifier directory (``Classifier.save``) that every command loads.
:func:`score_splits` then chooses its threshold on validation and scores every split per
source pair, on data that neither the fit nor the threshold saw (``test``, ``random_test``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from genolong.datasets.promoter import PromoterRecord
from genolong.evaluation.calibration import fit_logit_stack, fold_into_head
from genolong.evaluation.cross_source import pair_metrics
from genolong.evaluation.kmer_baseline import KmerBaselineConfig, fit_kmer_baseline
from genolong.evaluation.metrics import best_f1_threshold, expected_calibration_error, promoter_metrics
from genolong.inference.classifier import Classifier
from genolong.inference.kmer_component import KmerComponent
from genolong.inference.predict.records import predict_all

METHOD = "logistic regression on [network logit, k-mer logit] of valid, folded into the output layer and the k-mer component"


def fit_kmer_ensemble(
    classifier: Classifier,
    train: Sequence[PromoterRecord],
    valid: Sequence[PromoterRecord],
    config: KmerBaselineConfig | None = None,
    batch_size: int = 256,
) -> dict:
    """Add a k-mer component to ``classifier`` (in place) and calibrate the sum on ``valid``.

    Args:
        classifier: a single-output promoter classifier without a k-mer component.
        train: the records the k-mer model is fitted on (the network's training split).
        valid: held-out records (other sources) for ``C``, the weights and the offset.
        config: the k-mer model's (default: the baseline's).

    Returns:
        A JSON-ready record: ``network_weight`` (a), ``kmer_weight`` (c), ``offset`` (b), the k-mer
        model's ``C`` and feature count, and the validation ECE of the network alone.
    """
    if classifier.kmer is not None or len(classifier.info.label_names) != 1:
        raise ValueError("fit_kmer_ensemble takes a one-output classifier without a k-mer component")
    pipeline, _ = fit_kmer_baseline(list(train), list(valid), config or KmerBaselineConfig())
    kmer = KmerComponent.from_pipeline(pipeline).bind(classifier.tokenizer)
    sequences = [r.sequence for r in valid]
    logits = np.concatenate(
        [
            np.stack(
                [
                    classifier.logits(batch)[:, 0].cpu().numpy(),
                    kmer.token_logits(classifier.encode(batch)["input_ids"]).numpy(),
                ],
                axis=1,
            )
            for batch in (sequences[i : i + batch_size] for i in range(0, len(sequences), batch_size))
        ]
    )  # (n, 2): network, k-mer
    labels = np.array([r.label for r in valid])
    (network_weight, kmer_weight), offset = fit_logit_stack(logits, labels)
    fold_into_head(classifier.model.classifier.classifier, float(network_weight), offset)
    classifier.kmer = KmerComponent.from_pipeline(pipeline, scale=float(kmer_weight)).bind(classifier.tokenizer)
    return {
        "method": METHOD,
        "network_weight": float(network_weight),
        "kmer_weight": float(kmer_weight),
        "offset": offset,
        "kmer_C": float(pipeline.named_steps["logistic"].C),
        "kmer_features": len(kmer.kmers),
        "valid_ece_network": expected_calibration_error(labels, 1 / (1 + np.exp(-logits[:, 0]))),
    }


def score_splits(
    classifier: Classifier, splits: dict[str, Sequence[PromoterRecord]], batch_size: int = 256
) -> dict:
    """The F1-best threshold on ``splits["valid"]``; the metrics of every split, overall and per source pair.

    Returns:
        ``threshold``, ``valid`` and ``test`` metrics (:func:`promoter_metrics`) and ``by_source``:
        ``{split: pair_metrics(...)}`` for every split but ``train``.
    """
    scores = {
        name: (
            np.array([r.label for r in records]),
            predict_all(classifier, (r.sequence for r in records), batch_size)[:, 0],
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
