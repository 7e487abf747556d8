"""Platt scaling (Platt 1999) folded into a classifier's output layer: ``p = sigmoid(a * logit + b)``,
fitted by logistic regression on held-out data (the validation sources, never the test ones). The
head is linear, so ``a * (W h + c) + b = (a W) h + (a c + b)`` is an ordinary head: the calibrated
model is a classifier directory every command loads unchanged."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from genolong.core.errors import UserError


class BackwardsRanking(UserError):
    """Every model ranks the held-out data backwards: no non-negative stacking fits it."""


def fit_platt(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The ``a, b`` of ``sigmoid(a * logit + b)`` best fitting 0/1 ``labels`` from held-out ``logits`` (both
    ``(n,)``); a UserError for one label only, :class:`BackwardsRanking` for a scale ``a <= 0``."""
    labels = np.asarray(labels).astype(int).ravel()
    if set(np.unique(labels)) != {0, 1}:
        raise UserError("calibration needs both promoters and non-promoters in the validation split")
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(np.asarray(logits, dtype=float).reshape(-1, 1), labels)
    scale, offset = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    if scale <= 0:
        raise BackwardsRanking(f"calibration found a scale of {scale:.3g}: the model ranks validation data backwards")
    return scale, offset


@torch.no_grad()
def fold_into_head(linear: torch.nn.Linear, scale: float, offset: float) -> None:
    """Make ``linear`` output ``scale * logit + offset`` (in place)."""
    linear.weight.mul_(scale)
    linear.bias.mul_(scale).add_(offset)
