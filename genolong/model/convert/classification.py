"""Checkpoints with a classification head: refused, with the one line that says what differs.

genolong's classifier (:class:`~genolong.model.heads.ClassificationHead`) is one linear layer on
the first token's final hidden state. transformers' sequence classifiers put a dense layer and
a nonlinearity before theirs:

* ``BertForSequenceClassification`` (GENA-LM's BERTs too): the pooler, ``tanh(dense([CLS]))``,
  then ``classifier``;
* ``BigBirdForSequenceClassification``: ``classifier.dense``, the config's ``hidden_act``, then
  ``classifier.out_proj`` on [CLS];
* ``EsmForSequenceClassification``: ``classifier.dense``, ``tanh``, then ``classifier.out_proj``
  on ``<cls>``.

A nonlinearity between two linear layers is not one linear layer, so no genolong classifier
computes these logits; such a checkpoint is refused rather than converted approximately. Its
encoder is the family's masked-LM encoder fine-tuned: convert the masked-LM checkpoint it was
fine-tuned from and fine-tune that (``genolong promoter finetune``, ``genolong chromatin finetune``).
"""

from __future__ import annotations

from typing import Any

from genolong.model.convert.source import ConversionError, SourceCheckpoint

#: The classification head of transformers' sequence classifier, by ``model_type``.
SEQUENCE_HEADS = {
    "bert": "the pooler, tanh(dense([CLS])), then a linear layer",
    "big_bird": "dense, {hidden_act}, then a linear layer (out_proj) on [CLS]",
    "esm": "dense, tanh, then a linear layer (out_proj) on <cls>",
}
GENOLONG_HEAD = "genolong's classifier is one linear layer on [CLS]"
ADVICE = "convert the masked-LM checkpoint it was fine-tuned from and fine-tune it with `genolong promoter|chromatin finetune`"


def classifier_architecture(config: dict[str, Any], weights: dict) -> str | None:
    """The classifier the checkpoint holds, or None when its weights have no ``classifier.*``
    tensor. The weights decide, the config only names it (its first ``...Classification``
    architecture, if any)."""
    if not any(name.startswith("classifier.") for name in weights):
        return None
    named = [name for name in config.get("architectures") or [] if "Classification" in name]
    return named[0] if named else f"a {config['model_type']} checkpoint with classifier weights"


def refuse_classifier(source: SourceCheckpoint) -> None:
    """Raise ConversionError naming how the source's classification head differs from genolong's.

    Does nothing for a checkpoint without a classification head.
    """
    architecture = classifier_architecture(source.config, source.weights)
    if architecture is None:
        return
    model_type = source.config["model_type"]
    if architecture.endswith("ForSequenceClassification") and model_type in SEQUENCE_HEADS:
        head = SEQUENCE_HEADS[model_type].format(hidden_act=source.config.get("hidden_act", "gelu_new"))
        raise ConversionError(f"{architecture} is not supported: its head is {head}, {GENOLONG_HEAD}; {ADVICE}")
    raise ConversionError(f"{architecture} is not supported: {GENOLONG_HEAD} (sequence classification only); {ADVICE}")
