"""Task heads on the encoder's hidden states (B, L, N); V = vocabulary size, C = labels.

* :class:`MaskedLMHead` -- token logits, with labels only at the M masked positions (BigBird
  App. F.1 pretraining objective).
* :class:`ClassificationHead` -- a linear layer on [CLS]: the promoter classifier (App. F.2) and
  the 919-way chromatin profile (App. F.3), the loss chosen by ``problem_type`` as in transformers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from genolong.model.encoder import ACTIVATIONS, layer_norm

#: Activations of the classifier's optional pooler (``config.classifier_pooler``): the encoder's and tanh.
POOLER_ACTIVATIONS = {**ACTIVATIONS, "tanh": torch.tanh}

#: Label value that marks a position without an MLM target (the transformers convention).
IGNORE_INDEX = -100

#: What a sequence classifier reads (``config.classifier_pooling``): the [CLS] row, or the masked
#: mean / max over the real tokens.
CLASSIFIER_POOLINGS = ("cls", "mean", "max")


def pool_tokens(hidden: torch.Tensor, attention_mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """One vector per row, (B, L, N), mask (B, L) or None -> (B, 1, N): the first token
    (``mode="cls"``), or the ``"mean"`` / ``"max"`` over the real tokens (padding never counts)."""
    real = None if attention_mask is None else attention_mask.bool()
    if mode == "cls":
        return hidden[:, :1]
    if mode == "mean":
        if real is None:
            return hidden.mean(dim=1, keepdim=True)
        weights = real[..., None].to(hidden.dtype)
        return (hidden * weights).sum(dim=1, keepdim=True) / weights.sum(dim=1, keepdim=True).clamp(min=1)
    if mode == "max":
        if real is not None:
            hidden = hidden.masked_fill(~real[..., None], -math.inf)
        return hidden.amax(dim=1, keepdim=True)
    raise ValueError(f"unknown pooling {mode!r}; choose one of: {', '.join(CLASSIFIER_POOLINGS)}")


class TokenPooling(nn.Module):
    """``config.classifier_pooling`` as a classifier's fusion: (B, L, N), mask -> (B, 1, N)
    (mean pooling: the global-average read-out of DeepSEA-like CNNs)."""

    def __init__(self, config: Any):
        super().__init__()
        self.mode = config.classifier_pooling

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return pool_tokens(hidden, attention_mask, self.mode)


class MaskedLMHead(nn.Module):
    """BERT's MLM head: dense -> activation (``head_act``, default ``hidden_act``) -> LayerNorm ->
    decoder to V logits; the owning model ties the decoder to the token embedding."""

    def __init__(self, config: Any):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=getattr(config, "head_dense_bias", True))
        self.activation = ACTIVATIONS[getattr(config, "head_act", None) or config.hidden_act]
        self.norm = layer_norm(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, hidden: torch.Tensor,
                labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(logits, loss)`` of hidden (B, L, N): without labels, (B, L, V) and None; with labels
        (B, L) int64, ``IGNORE_INDEX`` where unmasked, logits (M, V) at the M masked positions in
        row-major order and their mean cross-entropy (15% masking skips 85% of the largest matmul)."""
        if labels is None:
            return self.decoder(self.norm(self.activation(self.dense(hidden)))), None
        masked = labels != IGNORE_INDEX  # (B, L)
        selected = hidden[masked]  # (M, N)
        logits = self.decoder(self.norm(self.activation(self.dense(selected))))  # (M, V)
        return logits, F.cross_entropy(logits.float(), labels[masked])


class ClassificationHead(nn.Module):
    """Dropout and a linear layer on the first ([CLS]) token: (B, L, N) -> (B, C).

    With ``config.classifier_pooler`` (a :data:`POOLER_ACTIVATIONS` name), a dense layer (N, N)
    and that activation come first, ``classifier(dropout(act(dense(dropout(cls)))))`` as in
    transformers' BigBird and ESM classifiers; ``config.classifier_norm`` adds a LayerNorm after
    the activation (ModernBERT). ``config.problem_type`` picks the loss, as in transformers:
    cross-entropy on (B,) int64 class ids (single-label), binary cross-entropy on (B, C) 0/1
    labels, positives weighted by ``positive_label_weight`` (multi-label; 8 in BigBird App. F.3),
    or mean squared error on (B, C) or (B,) when C = 1 (regression).
    """

    def __init__(self, config: Any):
        super().__init__()
        dropout = config.classifier_dropout
        self.dropout = nn.Dropout(config.hidden_dropout_prob if dropout is None else dropout)
        pooler = config.classifier_pooler
        dense_bias = getattr(config, "head_dense_bias", True)
        self.dense = None if pooler is None else nn.Linear(config.hidden_size, config.hidden_size, bias=dense_bias)
        self.activation = None if pooler is None else POOLER_ACTIVATIONS[pooler]
        self.norm = layer_norm(config) if pooler is not None and getattr(config, "classifier_norm", False) else None
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.problem_type = config.problem_type
        self.positive_label_weight = config.positive_label_weight

    def forward(self, hidden: torch.Tensor,
                labels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits (B, C), and the loss (scalar) when labels are given."""
        first = self.dropout(hidden[:, 0])  # (B, N)
        if self.dense is not None:
            first = self.activation(self.dense(first))
            first = self.dropout(first if self.norm is None else self.norm(first))
        logits = self.classifier(first)
        if labels is None:
            return logits, None
        return logits, self.loss(logits, labels)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of ``problem_type`` on logits (B, C), in fp32; without one, inferred as in
        transformers (one label: regression; integer labels: single-label; else multi-label)."""
        logits = logits.float()
        problem_type = self.problem_type
        if problem_type is None:
            if logits.shape[-1] == 1:
                problem_type = "regression"
            elif labels.dtype in (torch.long, torch.int):
                problem_type = "single_label_classification"
            else:
                problem_type = "multi_label_classification"
        if problem_type == "single_label_classification":
            return F.cross_entropy(logits, labels.long().view(-1))  # class ids (B,) or (B, 1)
        if problem_type == "multi_label_classification":
            labels = labels.to(logits.dtype).view_as(logits)
            weight = self.positive_label_weight
            pos_weight = None if weight == 1.0 else logits.new_full((logits.shape[-1],), weight)
            return F.binary_cross_entropy_with_logits(logits, labels, pos_weight=pos_weight)
        return F.mse_loss(logits, labels.to(logits.dtype).view_as(logits))


def output_activation(logits: torch.Tensor, problem_type: str | None) -> torch.Tensor:
    """What a classifier outputs from its logits (B, C), by its ``problem_type``: a softmax over
    the classes (``single_label_classification``), the values themselves (``regression``), or
    independent sigmoids (``multi_label_classification``, and every classifier without one)."""
    if problem_type == "single_label_classification":
        return torch.softmax(logits, dim=-1)
    if problem_type == "regression":
        return logits
    return torch.sigmoid(logits)

