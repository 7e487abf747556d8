"""Sequence-classification checkpoints: the head, and its outputs as one of genolong's problem types.

transformers' sequence classifiers put a dense layer and a nonlinearity before the output layer,
on [CLS]; genolong's :class:`~genolong.model.heads.ClassificationHead` has the same with
``classifier_pooler`` (:data:`SEQUENCE_HEADS`): BERT's (GENA-LM's and DNABERT-2's too)
``tanh(pooler.dense([CLS]))`` then ``classifier``; BigBird's ``classifier.dense``,
``ACT2FN[hidden_act]``, ``classifier.out_proj``; ESM's the same with ``tanh``; ModernBERT's, on
[CLS] or the masked mean (``classifier_pooling``), ``head.dense``, ``classifier_activation``,
``head.norm``, then ``classifier``.

The output layer keeps the source's ``problem_type``, except that a two-class softmax becomes
one sigmoid, weight ``w1 - w0``, bias ``b1 - b0`` (``softmax(l)[1] = sigmoid(l1 - l0)``), named
``id2label[1]``. An unset problem type is read as transformers reads it (one output: regression;
more: single-label), and the log says so; for the promoter and chromatin commands, which read
independent sigmoids only (:data:`TASKS`), one output is a sigmoid and other heads are refused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from genolong.classifier.directory import TaskInfo
from genolong.convert import target
from genolong.convert.bert import genolong_activation
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights
from genolong.model.configuration import MULTI_LABEL, PROBLEM_TYPES, REGRESSION, SINGLE_LABEL

log = logging.getLogger(__name__)

#: Each family's sequence-classifier head: (dense layer, its activation, output layer); None:
#: the activation is the config's ``hidden_act``.
SEQUENCE_HEADS = {
    "bert": ("pooler.dense", "tanh", "classifier"),
    "big_bird": ("classifier.dense", None, "classifier.out_proj"),
    "esm": ("classifier.dense", "tanh", "classifier.out_proj"),
    "mosaic_bert": ("pooler.dense", "tanh", "classifier"),
    "modernbert": ("head.dense", None, "classifier"),
}
#: Heads whose activation is named by another config key than ``hidden_act``: (key, its default).
HEAD_ACTIVATIONS = {"modernbert": ("classifier_activation", "gelu")}
#: Heads with a LayerNorm after the activation (ModernBERT's ``head.norm``).
HEAD_NORMS = {"modernbert": "head.norm"}


@dataclass(frozen=True)
class ConvertTask:
    """What ``genolong convert --task`` needs of a task: the problem types its commands read, the
    command that scores with the converted directory, and the one that fine-tunes a masked-LM one."""

    problem_types: tuple[str, ...]
    command: str
    finetune: str


#: ``genolong convert --task``: the tasks whose commands read a converted classifier; ``labelled``
#: is ``genolong task`` (your own labelled sequences, any problem type).
TASKS = {
    "promoter": ConvertTask((MULTI_LABEL,), "genolong promoter predict", "genolong promoter finetune"),
    "chromatin": ConvertTask((MULTI_LABEL,), "genolong chromatin predict", "genolong chromatin finetune"),
    "labelled": ConvertTask(PROBLEM_TYPES, "genolong task predict", "genolong task finetune"),
}


def classifier_architecture(config: dict[str, Any], weights: dict) -> str | None:
    """The classifier the checkpoint holds (named by the config's first ``...Classification``
    architecture, if any), or None when its weights have no ``classifier.*`` tensor."""
    if not any(name.startswith("classifier.") for name in weights):
        return None
    named = [name for name in config.get("architectures") or [] if "Classification" in name]
    return named[0] if named else f"a {config['model_type']} checkpoint with classifier weights"


def sequence_head(source: SourceCheckpoint, weights: Weights,
                  task: str | None = None) -> tuple[dict[str, Any], dict]:
    """GenolongConfig fields and state dict of the classification head of ``source``, for the
    commands of ``task`` (None: any problem type); a ConversionError for another classifier
    (token classification, ...) or a problem type ``task``'s commands do not read."""
    config = source.config
    architecture = classifier_architecture(config, source.weights)
    if not architecture.endswith("ForSequenceClassification"):
        raise ConversionError(f"{architecture} is not supported: genolong converts masked-LM and "
                              "sequence-classification (...ForSequenceClassification) checkpoints")
    model_type = config["model_type"]
    dense, activation, output = SEQUENCE_HEADS[model_type]
    activation_key, default = HEAD_ACTIVATIONS.get(model_type, ("hidden_act", "gelu_new"))
    weight, bias = weights.linear(output)
    readable = PROBLEM_TYPES if task is None else convert_task(task).problem_types
    weight, bias, labels, problem_type = converted_outputs(config, weight, bias, readable)
    if problem_type not in readable:
        raise ConversionError(f"--task {task} reads independent sigmoid outputs; this checkpoint's head is "
                              f"{describe_head(problem_type, len(labels))}",
                              hint="convert it with --task labelled, for `genolong task predict`")
    fields = {
        "classifier_pooler": activation or genolong_activation(config.get(activation_key, default)),
        "classifier_dropout": config.get("classifier_dropout"),
        "num_labels": len(labels),
        "problem_type": problem_type,
        "id2label": dict(enumerate(labels)),
        "label2id": {label: index for index, label in enumerate(labels)},
    }
    norm = HEAD_NORMS.get(model_type)
    if norm is not None:
        fields["classifier_norm"] = True
    return fields, target.classifier_state(weights.linear(dense), (weight, bias),
                                           None if norm is None else weights.linear(norm))


def converted_outputs(
    config: dict[str, Any], weight: torch.Tensor, bias: torch.Tensor, readable: tuple[str, ...] = PROBLEM_TYPES
) -> tuple[torch.Tensor, torch.Tensor, list[str], str]:
    """The output layer (C', N), (C',), its C' label names and its problem type, from the source's
    weight (C, N) and bias (C,) (module docstring); ``readable``: the problem types the target
    commands read, which decide what one output of an unset problem type is."""
    classes = weight.shape[0]
    id2label = config.get("id2label") or {}
    names = [str(id2label.get(str(index), id2label.get(index, f"LABEL_{index}"))) for index in range(classes)]
    problem_type = config.get("problem_type")
    if problem_type is None:
        problem_type = SINGLE_LABEL if classes > 1 else REGRESSION if REGRESSION in readable else MULTI_LABEL
        log.info("config.json sets no problem_type: read as %s (%d output%s)%s", problem_type, classes,
                 "s" if classes > 1 else "", ", as transformers does" if problem_type != MULTI_LABEL else
                 ", the sigmoid the task's commands read")
    elif problem_type not in PROBLEM_TYPES:
        raise ConversionError(f"problem_type {problem_type!r} is not one of {', '.join(PROBLEM_TYPES)}")
    if problem_type == SINGLE_LABEL and classes == 2:
        return (weight[1] - weight[0])[None], (bias[1] - bias[0])[None], names[1:], MULTI_LABEL
    return weight, bias, names, problem_type


def describe_head(problem_type: str, outputs: int) -> str:
    """``1 sigmoid output``, ``a softmax over 3 classes``, ``2 regression outputs``."""
    plural = "s" if outputs > 1 else ""
    if problem_type == SINGLE_LABEL:
        return f"a softmax over {outputs} classes"
    return f"{outputs} {'sigmoid' if problem_type == MULTI_LABEL else 'regression'} output{plural}"


def convert_task(task: str) -> ConvertTask:
    """What ``task``'s commands read; a ConversionError for a task that ``convert`` does not know."""
    try:
        return TASKS[task]
    except KeyError:
        raise ConversionError(f"--task {task}: choose one of {', '.join(TASKS)}") from None


def task_info(task: str, window_bp: int, config: Any) -> TaskInfo:
    """The ``genolong_task.json`` of a converted classifier for ``task``: windows of ``window_bp``,
    the model's positions as tokens, the source's labels, for sigmoids threshold 0.5 (a two-class
    softmax's argmax)."""
    convert_task(task)
    if window_bp < 1:
        raise ConversionError(f"--window-bp must be positive, got {window_bp}")
    source = config.converted_from["name_or_path"]
    return TaskInfo(
        task=task,
        window_bp=window_bp,
        min_bp=window_bp,
        max_len=config.max_position_embeddings,
        label_names=[config.id2label[index] for index in range(config.num_labels)],
        threshold=0.5 if config.problem_type == MULTI_LABEL else None,
        provenance={"trained_on": f"the data of {Path(source).name} (converted by genolong convert)",
                    "converted_from": config.converted_from},
    )
