"""Per-profile chromatin AUCs (genolong/evaluation/metrics.py): hand-computed cases, scikit-learn, undefined profiles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers.deepsea import real_rows
from sklearn.metrics import average_precision_score, roc_auc_score

from genolong.core.errors import UserError
from genolong.evaluation.metrics import (
    CHROMATIN_REFERENCE_MEDIAN_AUC,
    format_chromatin_medians,
    median_auc_by_class,
    per_profile_auc,
)
from genolong.evaluation.profiles import profile_classes


def test_hand_computed_aucs():
    labels = np.array([[0, 0, 1], [0, 1, 0], [1, 1, 1], [1, 0, 1]])
    scores = np.array([[0.1, 0.5, 0.9], [0.4, 0.5, 0.1], [0.35, 0.2, 0.8], [0.8, 0.3, 0.7]])
    aucs = per_profile_auc(labels, scores)
    # Column 0: positives score 0.35 and 0.8, negatives 0.1 and 0.4. Of the 4 (positive,
    # negative) pairs, 3 are ordered correctly (0.35 < 0.4 is not): ROC AUC = 3/4.
    # Ranked by score: 0.8 (+), 0.4 (-), 0.35 (+), 0.1 (-); precision at each positive is
    # 1/1 and 2/3, so average precision = (1 + 2/3) / 2 = 5/6.
    assert aucs.roc_auc[0] == pytest.approx(0.75) and aucs.pr_auc[0] == pytest.approx(5 / 6)
    # Column 1: positives 0.5 and 0.2, negatives 0.5 and 0.3. Pairs: (0.5, 0.5) a tie = 1/2,
    # (0.5, 0.3) = 1, (0.2, 0.5) = 0, (0.2, 0.3) = 0: ROC AUC = 1.5/4 = 0.375.
    # Thresholds: >= 0.5 takes both 0.5 rows (1 positive of 2): precision 1/2, recall 1/2;
    # >= 0.3 adds a negative; >= 0.2 adds the last positive: precision 2/4, recall 1.
    # Average precision = 1/2 * 1/2 + 1/2 * 2/4 = 0.5.
    assert aucs.roc_auc[1] == pytest.approx(0.375) and aucs.pr_auc[1] == pytest.approx(0.5)
    # Column 2: the one negative (0.1) scores below every positive: both AUCs are 1.
    assert aucs.roc_auc[2] == 1.0 and aucs.pr_auc[2] == 1.0
    assert aucs.positives.tolist() == [2, 2, 3] and aucs.negatives.tolist() == [2, 2, 1]


def test_profiles_without_positives_or_negatives_are_nan_not_errors():
    labels = np.array([[0, 1, 1], [0, 1, 0], [0, 1, 1]])
    scores = np.array([[0.2, 0.3, 0.9], [0.5, 0.1, 0.2], [0.9, 0.4, 0.6]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no sklearn "only one class present" warnings either
        aucs = per_profile_auc(labels, scores)
    assert np.isnan(aucs.roc_auc[:2]).all() and np.isnan(aucs.pr_auc[:2]).all()
    assert aucs.defined.tolist() == [False, False, True]
    assert aucs.roc_auc[2] == 1.0


def test_agrees_with_sklearn_on_random_data():
    rng = np.random.default_rng(0)
    labels = (rng.random((300, 60)) < 0.05).astype(np.uint8)
    labels[:, 7] = 0  # like DeepSEA's test set, a profile without positives
    scores = labels * rng.normal(0.5, 1, labels.shape) + rng.normal(0, 1, labels.shape)
    aucs = per_profile_auc(labels, scores)
    assert np.isnan(aucs.roc_auc).sum() == 1
    for column in range(60):
        if labels[:, column].any():
            assert aucs.roc_auc[column] == pytest.approx(roc_auc_score(labels[:, column], scores[:, column]))
            assert aucs.pr_auc[column] == pytest.approx(
                average_precision_score(labels[:, column], scores[:, column])
            )
        else:
            assert np.isnan(aucs.roc_auc[column])


def test_real_deepsea_rows_give_aucs_for_profiles_with_positives(real_data):
    windows, labels = real_rows(real_data)
    # A label-free score: the GC content of the central 1,000 bp, the same for every profile.
    gc = np.array([sum(window[3500:4500].count(base) for base in "GC") / 1000 for window in windows])
    aucs = per_profile_auc(labels, np.repeat(gc[:, None], 919, axis=1))
    with_positives = labels.any(axis=0) & ~labels.all(axis=0)
    assert aucs.defined.tolist() == with_positives.tolist() and with_positives.sum() == 483
    column = int(np.flatnonzero(with_positives)[0])
    assert aucs.roc_auc[column] == pytest.approx(roc_auc_score(labels[:, column], gc))
    medians = median_auc_by_class(aucs.roc_auc, profile_classes())
    assert list(medians) == ["TF", "DHS", "HM"]
    assert sum(m["profiles"] for m in medians.values()) == 483
    assert sum(m["undefined"] for m in medians.values()) == 919 - 483


def test_median_by_class_hand_case():
    auc = np.array([0.9, np.nan, 0.7, 0.6, np.nan])
    medians = median_auc_by_class(auc, np.array(["TF", "TF", "TF", "DHS", "HM"]))
    assert medians["TF"] == {"median": pytest.approx(0.8), "profiles": 2, "undefined": 1}
    assert medians["DHS"] == {"median": 0.6, "profiles": 1, "undefined": 0}
    assert np.isnan(medians["HM"]["median"]) and medians["HM"]["profiles"] == 0


def test_table_prints_the_published_reference_rows():
    medians = median_auc_by_class(np.array([0.9, 0.8, 0.7]), np.array(["TF", "DHS", "HM"]))
    table = format_chromatin_medians({"tiny": medians})
    lines = table.splitlines()
    assert lines[0].split() == ["model", "TF", "DHS", "HM"]
    assert lines[1].split() == ["tiny", "90.0", "80.0", "70.0"]
    assert lines[2].split() == ["DeepSEA", "(published)", "95.8", "92.3", "85.6"]
    assert lines[3].split() == ["BigBird", "(published)", "96.1", "92.1", "88.7"]
    assert CHROMATIN_REFERENCE_MEDIAN_AUC["BigBird"]["HM"] == 0.887


def test_bad_inputs():
    with pytest.raises(ValueError, match="must both be"):
        per_profile_auc(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(UserError, match="0 or 1"):
        per_profile_auc(np.array([[2], [0]]), np.zeros((2, 1)))
    with pytest.raises(UserError, match="NaN"):
        per_profile_auc(np.array([[1], [0]]), np.array([[np.nan], [0.0]]))
