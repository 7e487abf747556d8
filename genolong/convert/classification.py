"""Sequence-classification checkpoints: the head, and its outputs as genolong's sigmoids.

transformers' sequence classifiers put a dense layer and a nonlinearity before the output
layer, on the first token's final hidden state; genolong's
:class:`~genolong.model.heads.ClassificationHead` has the same with ``classifier_pooler``:

* ``BertForSequenceClassification`` (GENA-LM's BERTs too): the pooler, ``tanh(pooler.dense([CLS]))``,
  then ``classifier``;
* ``BigBirdForSequenceClassification``: ``classifier.dense``, ``ACT2FN[hidden_act]``, then
  ``classifier.out_proj``;
* ``EsmForSequenceClassification``: ``classifier.dense``, ``tanh``, then ``classifier.out_proj``.

Every genolong classifier has C independent sigmoid outputs, so the output layer maps as:

* ``problem_type: multi_label_classification``, or a single output: the logits as they are;
* a two-class softmax: one logit ``l1 - l0``, weight ``w1 - w0`` and bias ``b1 - b0``, since
  ``softmax(l)[1] = 1 / (1 + exp(l0 - l1)) = sigmoid(l1 - l0)``; its label is ``id2label[1]``;
* a softmax over more than two classes: refused (no set of independent sigmoids is a softmax
  over C > 2 classes), as is ``problem_type: regression`` (its output is not a probability).

A config without ``problem_type`` and more than one output is a softmax: transformers infers
single-label classification for integer labels and records ``problem_type`` otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from genolong.classifier.directory import TaskInfo
from genolong.convert import target
from genolong.convert.bert import genolong_activation
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights

#: Each family's sequence-classifier head: (dense layer, its activation, output layer); None:
#: the activation is the config's ``hidden_act``.
SEQUENCE_HEADS = {
    "bert": ("pooler.dense", "tanh", "classifier"),
    "big_bird": ("classifier.dense", None, "classifier.out_proj"),
    "esm": ("classifier.dense", "tanh", "classifier.out_proj"),
}
#: ``genolong convert --task``: the tasks whose commands read a converted classifier.
TASKS = ("promoter", "chromatin")


def classifier_architecture(config: dict[str, Any], weights: dict) -> str | None:
    """The classifier the checkpoint holds, or None when its weights have no ``classifier.*``
    tensor. The weights decide, the config only names it (its first ``...Classification``
    architecture, if any)."""
    if not any(name.startswith("classifier.") for name in weights):
        return None
    named = [name for name in config.get("architectures") or [] if "Classification" in name]
    return named[0] if named else f"a {config['model_type']} checkpoint with classifier weights"


def sequence_head(source: SourceCheckpoint, weights: Weights) -> tuple[dict[str, Any], dict]:
    """GenolongConfig fields and state dict of the classification head of ``source``.

    Raises:
        ConversionError: not a sequence classifier (token classification, ...), or outputs that
            are not independent sigmoids or a two-class softmax.
    """
    config = source.config
    architecture = classifier_architecture(config, source.weights)
    if not architecture.endswith("ForSequenceClassification"):
        raise ConversionError(
            f"{architecture} is not supported: genolong converts masked-LM and sequence-classification "
            "(...ForSequenceClassification) checkpoints"
        )
    dense, activation, output = SEQUENCE_HEADS[config["model_type"]]
    weight, bias = weights.linear(output)
    weight, bias, labels = sigmoid_outputs(config, weight, bias)
    fields = {
        "classifier_pooler": activation or genolong_activation(config.get("hidden_act", "gelu_new")),
        "classifier_dropout": config.get("classifier_dropout"),
        "num_labels": len(labels),
        "problem_type": "multi_label_classification",
        "id2label": dict(enumerate(labels)),
        "label2id": {label: index for index, label in enumerate(labels)},
    }
    return fields, target.classifier_state(weights.linear(dense), (weight, bias))


def sigmoid_outputs(
    config: dict[str, Any], weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """The output layer (C', N), (C',) whose sigmoids are the source's probabilities, and the
    C' label names, from the source's output layer weight (C, N) and bias (C,)."""
    classes = weight.shape[0]
    id2label = config.get("id2label") or {}
    names = [str(id2label.get(str(index), id2label.get(index, f"LABEL_{index}"))) for index in range(classes)]
    problem_type = config.get("problem_type")
    if problem_type == "regression":
        raise ConversionError(
            "problem_type 'regression' is not supported: genolong's classifiers output probabilities (sigmoids)"
        )
    if problem_type == "multi_label_classification" or classes == 1:
        return weight, bias, names
    if classes == 2:
        return (weight[1] - weight[0])[None], (bias[1] - bias[0])[None], names[1:]
    raise ConversionError(
        f"a softmax over {classes} classes is not supported: genolong's classifiers are independent sigmoids, "
        "which represent a softmax over 2 classes exactly but not over more"
    )


def task_info(task: str, window_bp: int, config: Any) -> TaskInfo:
    """The ``genolong_task.json`` of a converted classifier for ``task``: windows of
    ``window_bp``, as many tokens as the model has positions, the source's label names and
    threshold 0.5 (a two-class softmax's argmax)."""
    if task not in TASKS:
        raise ConversionError(f"--task {task}: choose one of {', '.join(TASKS)}")
    if window_bp < 1:
        raise ConversionError(f"--window-bp must be positive, got {window_bp}")
    source = config.converted_from["name_or_path"]
    return TaskInfo(
        task=task,
        window_bp=window_bp,
        min_bp=window_bp,
        max_len=config.max_position_embeddings,
        label_names=[config.id2label[index] for index in range(config.num_labels)],
        threshold=0.5,
        provenance={"trained_on": f"the data of {Path(source).name} (converted by genolong convert)",
                    "converted_from": config.converted_from},
    )
