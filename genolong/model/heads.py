"""Task heads on top of the encoder's hidden states.

Shapes: hidden (B, L, N) from :class:`~genolong.model.encoder.Encoder`; V = vocabulary size,
C = number of labels.

* :class:`MaskedLMHead` -- token logits; with labels, only at the M masked positions
  (BigBird App. F.1 pretraining objective).
* :class:`ClassificationHead` -- a linear layer on the [CLS] (first) token: the promoter
  classifier (App. F.2, binary) and the 919-way chromatin profile (App. F.3, 919 independent
  binary classifiers), chosen by ``problem_type`` as in transformers; with
  ``config.classifier_pooler`` a dense layer and that activation come first (the heads of
  transformers' BERT, BigBird and ESM sequence classifiers).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from genolong.model.encoder import ACTIVATIONS, layer_norm

#: Activations of the classifier's optional pooler (``config.classifier_pooler``): the encoder's,
#: and BERT's and ESM's tanh.
POOLER_ACTIVATIONS = {**ACTIVATIONS, "tanh": torch.tanh}

#: Label value that marks a position without an MLM target (the transformers convention).
IGNORE_INDEX = -100

#: What a sequence classifier reads (``config.classifier_pooling``): the [CLS] row, or the masked
#: mean / max over the real tokens.
CLASSIFIER_POOLINGS = ("cls", "mean", "max")


def pool_tokens(hidden: torch.Tensor, attention_mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """One vector per row from its real tokens: (B, L, N), mask (B, L) or None -> (B, 1, N).

    ``mode``: ``"cls"`` (the first token), ``"mean"`` or ``"max"`` (over the tokens whose mask is
    1; padding never counts).
    """
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
    """``config.classifier_pooling`` as a classifier's fusion: (B, L, N), mask -> (B, 1, N).

    Mean pooling hands the output layer the average of every position's features (a
    convolutional motif scanner's global average, the read-out of DeepSEA-like CNNs); [CLS]
    must learn to gather them through attention first.
    """

    def __init__(self, config: Any):
        super().__init__()
        self.mode = config.classifier_pooling

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return pool_tokens(hidden, attention_mask, self.mode)


class MaskedLMHead(nn.Module):
    """BERT's MLM head: dense -> activation (``head_act``, default ``hidden_act``) -> LayerNorm ->
    decoder to V logits (ModernBERT's without the dense bias: ``head_dense_bias`` False).

    The decoder weight is tied to the token embedding by the model that owns the head.
    """

    def __init__(self, config: Any):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=getattr(config, "head_dense_bias", True))
        self.activation = ACTIVATIONS[getattr(config, "head_act", None) or config.hidden_act]
        self.norm = layer_norm(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(
        self, hidden: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits, and the mean cross-entropy over the masked positions when labels are given.

        Args:
            hidden: (B, L, N) encoder output.
            labels: (B, L) int64 target token ids, ``IGNORE_INDEX`` where no token is masked.

        Returns:
            ``(logits, loss)``: without labels, logits (B, L, V) and loss None; with labels,
            logits (M, V) for the M masked positions in row-major order
            (``hidden[labels != IGNORE_INDEX]``) and a scalar loss. At 4K-16K tokens and
            15% masking this skips 85% of the largest matrix product of the model.
        """
        if labels is None:
            return self.decoder(self.norm(self.activation(self.dense(hidden)))), None
        masked = labels != IGNORE_INDEX  # (B, L)
        selected = hidden[masked]  # (M, N)
        logits = self.decoder(self.norm(self.activation(self.dense(selected))))  # (M, V)
        return logits, F.cross_entropy(logits.float(), labels[masked])


class ClassificationHead(nn.Module):
    """Dropout and a linear layer on the first ([CLS]) token: (B, L, N) -> (B, C).

    With ``config.classifier_pooler`` (an activation name of :data:`POOLER_ACTIVATIONS`), a
    dense layer (N, N) and that activation come before the output layer:
    ``classifier(dropout(act(dense(dropout(cls)))))``, the head of transformers' BigBird and ESM
    sequence classifiers (BERT's pooler has no dropout before its dense layer; dropout is the
    identity in eval mode, so the logits are the same); ``config.classifier_norm`` adds a
    LayerNorm after the activation (ModernBERT). Without a pooler (None) the head is the single
    linear layer.

    ``config.problem_type`` picks the loss, as in transformers:

    * ``"single_label_classification"``: cross-entropy, labels (B,) int64 class ids
      (promoter with ``num_labels=2``);
    * ``"multi_label_classification"``: binary cross-entropy with logits, labels (B, C) 0/1
      (919-way chromatin profile; ``config.positive_label_weight`` up-weights positives,
      8 in BigBird App. F.3; promoter as one logit with ``num_labels=1``);
    * ``"regression"``: mean squared error, labels (B, C) or (B,) when C = 1.
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

    def forward(
        self, hidden: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
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
        """The loss of ``problem_type`` on logits (B, C), computed in fp32.

        Without a ``problem_type`` it is inferred as in transformers: regression for one
        label, else single-label for integer labels and multi-label for float labels.
        """
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
            pos_weight = None
            if self.positive_label_weight != 1.0:
                pos_weight = logits.new_full((logits.shape[-1],), self.positive_label_weight)
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

