"""Platt scaling (Platt 1999) folded into a classifier's output layer.

A model trained on one set of sources is rarely calibrated on another: its probabilities
say more (or less) than the frequencies it achieves. Platt scaling fits
``p = sigmoid(a * logit + b)`` by logistic regression on held-out data (here: the validation
sources, never the test ones). Because the head is linear, ``a * (W h + c) + b = (a W) h +
(a c + b)``: the scaled head is an ordinary head, and the calibrated model is an ordinary
classifier directory that every command loads unchanged.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from genolong.core.errors import UserError


class BackwardsRanking(UserError):
    """Every model ranks the held-out data backwards: no non-negative stacking fits it."""


def fit_platt(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The scale ``a`` and offset ``b`` of ``sigmoid(a * logit + b)`` that best fit ``labels``.

    Args:
        logits: shape ``(n,)``, the model's logits on held-out data.
        labels: shape ``(n,)``, 0/1, both present.

    Raises:
        UserError: one label only, or a fit whose scale is not positive (it would invert the ranking).
    """
    weights, offset = fit_logit_stack(np.asarray(logits, dtype=float).reshape(-1, 1), labels)
    return float(weights[0]), offset


def fit_logit_stack(
    logits: np.ndarray, labels: np.ndarray, sample_weight: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """The weights ``w`` and offset ``b`` of ``sigmoid(logits @ w + b)`` that best fit ``labels``:
    Platt scaling of several models at once, which weighs them and calibrates their sum (stacking
    by logistic regression, Wolpert 1992), with weights kept non-negative as in Breiman's (1996)
    stacked regressions: a model whose fitted weight is not positive (it ranks the held-out data
    backwards next to the others) gets weight 0 and the others are fitted again.

    Args:
        logits: shape ``(n, m)``, the logits of ``m`` models on held-out data.
        labels: shape ``(n,)``, 0/1, both present.
        sample_weight: shape ``(n,)``, the weight of each record in the fit (default: equal).

    Returns:
        ``w`` of shape ``(m,)``, non-negative with at least one positive, and ``b``.

    Raises:
        UserError: one label only.
        BackwardsRanking: no model with a positive weight.
    """
    labels = np.asarray(labels).astype(int).ravel()
    if set(np.unique(labels)) != {0, 1}:
        raise UserError("calibration needs both promoters and non-promoters in the validation split")
    logits = np.asarray(logits, dtype=float)
    weights, kept = np.zeros(logits.shape[1]), np.arange(logits.shape[1])
    while True:
        fit = LogisticRegression(C=1e6, max_iter=1000).fit(logits[:, kept], labels, sample_weight=sample_weight)
        fitted, offset = fit.coef_[0].astype(float), float(fit.intercept_[0])
        if (fitted > 0).all():
            weights[kept] = fitted
            return weights, offset
        kept = kept[fitted > 0]
        if not len(kept):
            raise BackwardsRanking(
                f"calibration found a scale of {fitted.min():.3g}: the model ranks validation data backwards"
            )


@torch.no_grad()
def fold_into_head(linear: torch.nn.Linear, scale: float, offset: float) -> None:
    """Make ``linear`` output ``scale * logit + offset`` (in place)."""
    linear.weight.mul_(scale)
    linear.bias.mul_(scale).add_(offset)
