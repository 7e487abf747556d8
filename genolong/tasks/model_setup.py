"""The model and tokenizer a fine-tuning run starts from: a pretrained model directory (its
encoder weights, architecture and tokenizer; the config's backbone and attention parameters may
differ), or a model built from scratch over a tokenizer trained on the training split."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from genolong.attention import build_attention
from genolong.config import to_dict
from genolong.config.presets import switch_backbone
from genolong.dna.sequence import write_fasta
from genolong.dna.tokenizer import METADATA_FILE, TokenizerTrainConfig, train_tokenizer
from genolong.errors import UserError
from genolong.evaluation.chromatin import evaluation_rows
from genolong.model.configuration import SIZE_FIELDS, GenolongConfig, check_input_length
from genolong.model.loading import backbone_keys, check_tokenizer, load_model, read_model_config
from genolong.model.modeling import GenolongForSequenceClassification
from genolong.tasks.task import FinetuneConfig, LabelledSequences

log = logging.getLogger(__name__)

#: GenolongConfig fields that fix the shapes of the weights: a pretrained model keeps its own.
ARCHITECTURE_FIELDS = (
    *SIZE_FIELDS,
    "hidden_act",
    "pre_layer_norm",
    "final_layer_norm",
    "embedding_layer_norm",
    "local_conv_kernel",
)


def train_task_tokenizer(rows: LabelledSequences, out: Path, config: TokenizerTrainConfig, max_len: int) -> Path:
    """Train a tokenizer on (a sample of) the training split into ``out`` (reused when it matches)."""
    if (out / METADATA_FILE).is_file():
        if json.loads((out / METADATA_FILE).read_text())["config"] == to_dict(config):
            log.info("tokenizer: %s exists and matches, reused", out)
            return out
        raise UserError(
            f"{out} holds a tokenizer trained with another configuration", hint="choose another --out"
        )
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
                           problem_type: str = "multi_label_classification"):
    """A GenolongForSequenceClassification with ``num_labels`` outputs, in training mode; its
    ``problem_type`` (transformers' name) picks the loss and the outputs' activation
    (:func:`genolong.model.heads.output_activation`): sigmoids by default.

    From scratch: ``config.model`` in full. From ``pretrained``: its encoder weights and
    architecture, with the backbone, attention parameters, dropout and positive weight of
    ``config.model`` (a pretrained model may run with another attention: the weights do
    not depend on it, as BigBird started from RoBERTa's).
    """
    head = {"num_labels": num_labels, "problem_type": problem_type}
    if pretrained is None:
        model = GenolongForSequenceClassification(
            config.model.genolong_config(max_len=config.max_len, vocab_size=len(tokenizer), **head))
    else:
        model = _from_pretrained(Path(pretrained), config, tokenizer, head)
    check_input_length(config.max_len, model.config)
    if config.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model.train()  # from_pretrained returns it in eval mode (no dropout), and Lightning keeps modes


def _from_pretrained(pretrained: Path, config: FinetuneConfig, tokenizer, head: dict):
    """The pretrained model's encoder under ``config.model``'s non-architecture settings, with a new head."""
    base = read_model_config(pretrained)
    check_tokenizer(tokenizer, base, pretrained)
    settings = config.model.settings
    ignored = {k: v for k, v in settings.items() if k in ARCHITECTURE_FIELDS and getattr(base, k) != v}
    if ignored:
        log.warning(
            "the pretrained model fixes %s; the config's values are not used",
            ", ".join(f"{k}={getattr(base, k)} (config: {v})" for k, v in ignored.items()),
        )
    overrides = {k: v for k, v in settings.items() if k not in ARCHITECTURE_FIELDS}
    base_fields = {"backbone": base.backbone} | base.to_diff_dict()
    model_config = GenolongConfig(**(switch_backbone(base_fields, overrides) | head))
    # the head is new, an MLM head is dropped, and so are the weights of a backbone switched from
    ours, theirs = backbone_keys(model_config), backbone_keys(base)
    model = load_model(GenolongForSequenceClassification, pretrained, config=model_config,
                       new={"classifier.", "fusion.", *(ours - theirs)}, dropped={"lm_head.", *(theirs - ours)})
    _rebuild_missing_attention_buffers(model, ours - theirs)
    return model


def _rebuild_missing_attention_buffers(model, missing: set[str]) -> None:
    """Rebuild the attention buffers a pretrained checkpoint lacks (e.g. BigBird's seeded random
    layout when the model was pretrained with another backbone): from_pretrained leaves them
    uninitialized, and ``_init_weights`` only covers parameters."""
    for index, block in enumerate(model.genolong.encoder.blocks):
        prefix = f"genolong.encoder.blocks.{index}.attention."
        if not any(key.startswith(prefix) for key in missing):
            continue
        fresh = build_attention(model.config, index)
        for name, buffer in fresh.named_buffers():
            if prefix + name in missing:
                block.attention.get_buffer(name).copy_(buffer)
