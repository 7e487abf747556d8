"""``genolong convert`` (``docs/guide/convert.md``): transformers checkpoints -> genolong models.

Supported exactly (outputs equal to rounding error, tested layer by layer), by ``model_type``:
``big_bird`` (GENA-LM BigBird, :mod:`.big_bird`), ``bert`` (post-LN BERT and GENA-LM's pre-LN
BERTs, :mod:`.bert`), ``esm`` (Nucleotide Transformer v1 and v2, :mod:`.esm`), ``modernbert``
(modernGENA, :mod:`.modernbert`) and ``mosaic_bert`` (DNABERT-2, :mod:`.mosaic_bert`). A masked-LM
checkpoint becomes a :class:`~genolong.model.modeling.GenolongForMaskedLM`, a sequence
classifier a :class:`~genolong.model.modeling.GenolongForSequenceClassification` with the same
head (:mod:`.classification`). A genolong ``full`` model directory is a source too, to be made
long (:mod:`.long`). Anything else is refused with one line naming what genolong's encoder
lacks, never converted approximately; no code from the source directory is run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from genolong.convert.bert import bert_mlm_head, convert_bert
from genolong.convert.big_bird import convert_big_bird
from genolong.convert.classification import (
    TASKS,
    classifier_architecture,
    convert_task,
    describe_head,
    sequence_head,
    task_info,
)
from genolong.convert.esm import convert_esm, esm_mlm_head
from genolong.convert.fast_tokenizer import check_readable, fast_tokenizer
from genolong.convert.long import LongSpec, describe_long, make_long
from genolong.convert.modernbert import convert_modernbert, modernbert_mlm_head
from genolong.convert.mosaic_bert import convert_mosaic_bert
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights, read_source
from genolong.convert.target import build_model, tokenizer_fields, write_model_directory
from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongForSequenceClassification, GenolongPreTrainedModel

log = logging.getLogger(__name__)

#: Encoder converters by ``model_type``: GenolongConfig fields, the encoder's state dict, and
#: the source's weights with the head's still to take.
CONVERTERS: dict[str, Callable[[SourceCheckpoint], tuple[dict[str, Any], dict, Weights]]] = {
    "big_bird": convert_big_bird,
    "bert": convert_bert,
    "esm": convert_esm,
    "mosaic_bert": convert_mosaic_bert,
    "modernbert": convert_modernbert,
}
#: Masked-LM heads by ``model_type`` (BigBird's and DNABERT-2's are BERT's).
MLM_HEADS: dict[str, Callable[[Weights], dict]] = {"big_bird": bert_mlm_head, "bert": bert_mlm_head, "esm": esm_mlm_head,
                                                   "mosaic_bert": bert_mlm_head, "modernbert": modernbert_mlm_head}

#: Keys of a saved genolong config.json that a new save writes again.
GENOLONG_SAVE_KEYS = ("model_type", "transformers_version", "architectures", "dtype", "tokenizer_fingerprint",
                      "tie_word_embeddings")

#: Known DNA model families that cannot be converted exactly, by ``model_type``, and why.
REFUSED = {
    "hyenadna": "HyenaDNA is a long-convolution (Hyena) model, not an attention encoder",
    "caduceus": "Caduceus is a bidirectional Mamba (state-space) model, not an attention encoder",
    "mamba": "Mamba is a state-space model, not an attention encoder",
}


def convert_checkpoint(src: str | Path, out: str | Path, *, force: bool = False, task: str | None = None,
                       window_bp: int | None = None, long: LongSpec | None = None, name: str | None = None):
    """Convert the checkpoint in ``src`` into the genolong model directory ``out``, written
    atomically with the source's tokenizer (:mod:`.fast_tokenizer`); return the model, in eval mode.
    With ``task`` and ``window_bp`` a classifier also gets ``genolong_task.json``
    (:func:`.classification.task_info`); with ``long`` it is made long (:func:`.long.make_long`).
    ``name``: the source the config records (default: its ``_name_or_path`` or the directory's name).

    Raises:
        ConversionError: not a checkpoint, missing weights, an unsupported architecture or
            head, a tokenizer of another vocabulary, a config that contradicts the weights;
            ``task`` without ``window_bp`` (or the reverse), or for a masked-LM checkpoint;
            ``out`` is not empty and ``force`` is False.
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ConversionError(f"{out} already exists", hint="pass --force to replace it")
    if (task is None) != (window_bp is None):
        raise ConversionError("--task and --window-bp go together: a classifier directory needs both")
    source = read_source(src)
    if source.config["model_type"] == GenolongConfig.model_type:
        if long is None:
            raise ConversionError(f"{src} is already a genolong model", hint="pass --backbone to make it long")
        fields, state = genolong_weights(source)
    else:
        fields, state = convert_weights(source, task)
    if task is not None and "lm_head.decoder.weight" in state:
        raise ConversionError(f"--task {task} needs a sequence-classification checkpoint; {src} is a masked-LM one",
                              hint=f"fine-tune the converted model with `{convert_task(task).finetune}`")
    tokenizer = fast_tokenizer(source.tokenizer)
    check_readable(src, tokenizer)
    fields |= tokenizer_fields(tokenizer, state["genolong.encoder.embeddings.token.weight"].shape[0])
    fields.setdefault("converted_from", {
        "model_type": source.config["model_type"],
        "architectures": source.config.get("architectures"),
        "name_or_path": name or source.config.get("_name_or_path") or Path(src).name,
    })
    if long is not None:
        fields, state = make_long(fields, state, long)
    model = build_model(fields, state)
    if long is not None:
        log.info("%s", describe_long(model.config))
    info = None if task is None else task_info(task, window_bp, model.config)
    write_model_directory(model, tokenizer, out, info)
    return model


def genolong_weights(source: SourceCheckpoint) -> tuple[dict[str, Any], dict]:
    """GenolongConfig fields and state dict of a genolong model directory (a tied, unsaved
    masked-LM decoder restored from the token embedding)."""
    fields = {k: v for k, v in source.config.items() if k not in GENOLONG_SAVE_KEYS}
    state = dict(source.weights)
    if "lm_head.dense.weight" in state and "lm_head.decoder.weight" not in state:
        state["lm_head.decoder.weight"] = state["genolong.encoder.embeddings.token.weight"]
    return fields, state


def describe_conversion(model: GenolongPreTrainedModel, out: str | Path, task: str | None) -> str:
    """What ``genolong convert`` wrote to ``out``, and what the directory is for."""
    config = model.config
    line = (
        f"converted {config.converted_from['model_type']} ({config.num_hidden_layers} layers, hidden "
        f"{config.hidden_size}, {config.max_position_embeddings} positions, backbone {config.backbone}) -> {out}"
    )
    if not isinstance(model, GenolongForSequenceClassification):
        return line
    outputs = describe_head(config.problem_type, config.num_labels)
    if task is not None:
        return f"{line}: a {task} classifier ({outputs}) for `{convert_task(task).command}`"
    return (f"{line}: a sequence classifier ({outputs}) for AutoModelForSequenceClassification and fine-tuning "
            "(--model); convert with --task and --window-bp for the predict commands")


def convert_weights(source: SourceCheckpoint, task: str | None = None) -> tuple[dict[str, Any], dict]:
    """GenolongConfig fields and state dict of a GenolongForMaskedLM, or of a
    GenolongForSequenceClassification whose outputs ``task``'s commands read (None: any problem
    type) when ``source`` has a classifier; a ConversionError naming why it cannot be converted exactly."""
    model_type = source.config["model_type"]
    if model_type in REFUSED:
        raise ConversionError(f"model_type {model_type!r} is not supported: {REFUSED[model_type]}")
    if model_type not in CONVERTERS:
        raise ConversionError(f"model_type {model_type!r} is not supported (supported: "
                              f"{', '.join(CONVERTERS)})")
    fields, state, weights = CONVERTERS[model_type](source)
    if classifier_architecture(source.config, source.weights) is None:
        state |= MLM_HEADS[model_type](weights)
    else:
        head_fields, head_state = sequence_head(source, weights, task)
        fields, state = fields | head_fields, state | head_state
    unused = weights.unused()
    if unused:
        shown = ", ".join(unused[:4]) + (f" and {len(unused) - 4} more" if len(unused) > 4 else "")
        raise ConversionError(f"weights with no place in a genolong model: {shown}")
    return fields, state


__all__ = ["CONVERTERS", "LongSpec", "REFUSED", "TASKS", "ConversionError", "SourceCheckpoint",
           "convert_checkpoint", "convert_weights", "describe_conversion"]
