"""The model and tokenizer a fine-tuning run starts from: a pretrained model directory, or a model built
from scratch over a tokenizer trained on the training split."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Collection
from pathlib import Path

from genolong.attention import attention_defaults, build_attention
from genolong.config import to_dict
from genolong.config.presets import switch_backbone
from genolong.core.errors import UserError
from genolong.dna.sequence import write_fasta
from genolong.dna.tokenizer import METADATA_FILE, TokenizerTrainConfig, train_tokenizer
from genolong.evaluation.chromatin import evaluation_rows
from genolong.model.configuration import SIZE_FIELDS, VARIANT_FIELDS, GenolongConfig, check_input_length
from genolong.model.loading import (
    attention_buffer_keys,
    backbone_keys,
    check_tokenizer,
    load_model,
    read_model_config,
)
from genolong.model.modeling import GenolongForSequenceClassification
from genolong.tasks.task import FinetuneConfig, LabelledSequences

log = logging.getLogger(__name__)

#: GenolongConfig fields that fix the shapes of the weights: a pretrained model keeps its own.
ARCHITECTURE_FIELDS = (*SIZE_FIELDS, "hidden_act", "pre_layer_norm", "final_layer_norm",
                       "embedding_layer_norm", "local_conv_kernel", *VARIANT_FIELDS)

#: GenolongConfig fields a fine-tuning config sets on a pretrained model (regularisation and the new head).
TRAINING_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout",
                   "classifier_pooler", "classifier_pooling", "positive_label_weight")


def train_task_tokenizer(rows: LabelledSequences, out: Path, config: TokenizerTrainConfig, max_len: int) -> Path:
    """Train a tokenizer on (a sample of) the training split into ``out`` (reused when it matches)."""
    if (out / METADATA_FILE).is_file():
        if json.loads((out / METADATA_FILE).read_text())["config"] == to_dict(config):
            log.info("tokenizer: %s exists and matches, reused", out)
            return out
        raise UserError(f"{out} holds a tokenizer trained with another configuration",
                        hint="choose another --out")
    # twice the sample, evenly spaced over the split, so that the reservoir sample has a choice
    wanted_rows = max(1, 2 * config.sample_bp // max(1, len(rows.sequence(0))))
    chosen = evaluation_rows(len(rows), wanted_rows)
    log.info("tokenizer: training on %d sequences of the training split", len(chosen))
    handle, sample = tempfile.mkstemp(prefix=".tokenizer_sample.", suffix=".fa", dir=out.parent)
    os.close(handle)
    try:
        write_fasta(sample, ((f"row{row}", rows.sequence(int(row))) for row in chosen))
        train_tokenizer(sample, out, config, model_max_length=max_len, show_progress=False)
    finally:
        os.unlink(sample)
    return out


def build_classifier_model(config: FinetuneConfig, num_labels: int, tokenizer, pretrained: Path | None,
                           problem_type: str = "multi_label_classification", asked: Collection[str] = ()):
    """A GenolongForSequenceClassification with ``num_labels`` outputs of transformers' ``problem_type``,
    in training mode: ``config.model`` in full from scratch; else ``pretrained``'s encoder weights,
    architecture and attention with ``config.model``'s :data:`TRAINING_FIELDS`. The backbone or an
    attention parameter changes only when the user asked (``asked``: the ``model.`` keys set on the
    command line, ``--backbone``), never silently by a preset.
    """
    head = {"num_labels": num_labels, "problem_type": problem_type}
    if pretrained is None:
        model = GenolongForSequenceClassification(
            config.model.genolong_config(max_len=config.max_len, vocab_size=len(tokenizer), **head))
    else:
        model = _from_pretrained(Path(pretrained), config, tokenizer, head, set(asked))
    check_input_length(config.max_len, model.config)
    if config.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model.train()  # from_pretrained returns it in eval mode (no dropout), and Lightning keeps modes


def _from_pretrained(pretrained: Path, config: FinetuneConfig, tokenizer, head: dict, asked: set[str]):
    """The pretrained model with ``config.model``'s training fields, the attention settings in ``asked``
    and a new head."""
    base = read_model_config(pretrained)
    check_tokenizer(tokenizer, base, pretrained)
    settings = config.model.settings
    requested = {k: v for k, v in settings.items() if k in asked and k not in ARCHITECTURE_FIELDS}
    backbone = requested.get("backbone", base.backbone)
    if backbone != base.backbone:  # the new backbone's parameters: the config's (checked to be of that backbone)
        requested = {k: v for k, v in settings.items() if k in attention_defaults(backbone)} | requested
    training = {k: v for k, v in settings.items() if k in TRAINING_FIELDS}
    base_fields = {"backbone": base.backbone} | base.to_diff_dict()
    model_config = GenolongConfig(**(switch_backbone(base_fields, requested | training) | head))
    _log_taken_from_model(pretrained, model_config, settings, requested)
    # the head is new, an MLM head is dropped, and so are the weights of a backbone switched from;
    # the attention's buffers (a seeded random layout) are rebuilt when its settings changed
    ours, theirs = backbone_keys(model_config), backbone_keys(base)
    rebuilt = ours - theirs
    if _attention_settings(model_config) != _attention_settings(base):
        rebuilt |= attention_buffer_keys(model_config)
    model = load_model(GenolongForSequenceClassification, pretrained, config=model_config,
                       new={"classifier.", "fusion.", *rebuilt}, dropped={"lm_head.", *(theirs - ours)})
    _rebuild_attention_buffers(model, rebuilt)
    return model


def _attention_settings(config: GenolongConfig) -> dict:
    return {"backbone": config.backbone} | {k: getattr(config, k) for k in attention_defaults(config.backbone)}


def _log_taken_from_model(pretrained: Path, model_config: GenolongConfig, settings: dict, requested: dict) -> None:
    """Log the architecture and attention values kept from ``pretrained``; warn where the config differs."""
    kept = {k: getattr(model_config, k) for k in (*ARCHITECTURE_FIELDS, *_attention_settings(model_config))
            if k not in requested}
    log.info("from the pretrained model %s: %s", pretrained, ", ".join(f"{k}={v}" for k, v in kept.items()))
    replaced = {k: v for k, v in settings.items() if k in kept and kept[k] != v}
    if replaced:
        log.warning("the pretrained model's values replace the config's: %s (change the attention with "
                    "--backbone or --set model.KEY=VALUE; the sizes are the model's)",
                    ", ".join(f"{k}={kept[k]} (config: {v})" for k, v in replaced.items()))


def _rebuild_attention_buffers(model, rebuilt: set[str]) -> None:
    """Rebuild the attention buffers in ``rebuilt`` (e.g. BigBird's seeded random layout), which
    from_pretrained leaves uninitialized."""
    for index, block in enumerate(model.genolong.encoder.blocks):
        prefix = f"genolong.encoder.blocks.{index}.attention."
        if not any(key.startswith(prefix) for key in rebuilt):
            continue
        fresh = build_attention(model.config, index)
        for name, buffer in fresh.named_buffers():
            if prefix + name in rebuilt:
                block.attention.get_buffer(name).copy_(buffer)
