"""``genolong convert``: transformers checkpoints of published DNA models -> genolong models.

Supported, exactly (the converted model gives the source model's outputs to rounding error,
tested layer by layer):

* ``big_bird`` -- transformers' BigBird (GENA-LM ``gena-lm-bigbird-base-t2t``): :mod:`.big_bird`;
* ``bert`` -- transformers' post-LN BERT and GENA-LM's pre-LN BERTs (``gena-lm-bert-*``), told
  apart by their weights: :mod:`.bert`;
* ``esm`` with absolute positions (Nucleotide Transformer v1): :mod:`.esm`.

Masked-LM checkpoints only: a classification head is refused with what differs from genolong's
(:mod:`.classification`).

Anything else is refused with one line that names what genolong's encoder lacks, never
converted approximately. No code from the source directory is run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from genolong.model.convert.bert import convert_bert
from genolong.model.convert.big_bird import convert_big_bird
from genolong.model.convert.classification import refuse_classifier
from genolong.model.convert.esm import convert_esm
from genolong.model.convert.fast_tokenizer import fast_tokenizer
from genolong.model.convert.source import ConversionError, SourceCheckpoint, read_source
from genolong.model.convert.target import build_masked_lm, tokenizer_fields, write_model_directory

CONVERTERS: dict[str, Callable[[SourceCheckpoint], tuple[dict[str, Any], dict]]] = {
    "big_bird": convert_big_bird,
    "bert": convert_bert,
    "esm": convert_esm,
}

#: Known DNA model families that cannot be converted exactly, by ``model_type``, and why.
REFUSED = {
    "hyenadna": "HyenaDNA is a long-convolution (Hyena) model, not an attention encoder",
    "caduceus": "Caduceus is a bidirectional Mamba (state-space) model, not an attention encoder",
    "mamba": "Mamba is a state-space model, not an attention encoder",
}

#: Config keys of DNABERT-2 (ALiBi attention bias, GEGLU feed-forward, fused QKV).
DNABERT2_KEYS = ("alibi_starting_size",)


def convert_checkpoint(src: str | Path, out: str | Path, *, force: bool = False):
    """Convert the transformers checkpoint in ``src`` into a genolong model directory ``out``.

    ``out`` receives ``config.json`` and ``model.safetensors`` of a
    :class:`~genolong.model.modeling.GenolongForMaskedLM`, and the source's tokenizer with its
    ``tokenizer.json`` (built for a ``vocab.txt``-only ESM tokenizer: :mod:`.fast_tokenizer`).
    Nothing is written unless the whole conversion succeeds.

    Returns:
        The converted model (eval mode).

    Raises:
        ConversionError: not a checkpoint, missing weights, an unsupported architecture, a
            tokenizer of another vocabulary, a config that contradicts the weights; ``out``
            is not empty and ``force`` is False.
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ConversionError(f"{out} already exists", hint="pass --force to replace it")
    source = read_source(src)
    fields, state = convert_weights(source)
    tokenizer = fast_tokenizer(source.tokenizer)
    vocab_rows = state["genolong.encoder.embeddings.token.weight"].shape[0]
    fields |= tokenizer_fields(tokenizer, vocab_rows)
    fields["converted_from"] = {
        "model_type": source.config["model_type"],
        "architectures": source.config.get("architectures"),
        "name_or_path": source.config.get("_name_or_path") or Path(src).name,
    }
    model = build_masked_lm(fields, state)
    write_model_directory(model, tokenizer, out)
    return model


def convert_weights(source: SourceCheckpoint) -> tuple[dict[str, Any], dict]:
    """GenolongConfig fields and the state dict of a GenolongForMaskedLM for ``source`` (its
    tokenizer is not read), or a ConversionError naming why it cannot be converted exactly."""
    model_type = source.config["model_type"]
    if model_type in REFUSED:
        raise ConversionError(f"model_type {model_type!r} is not supported: {REFUSED[model_type]}")
    if any(key in source.config for key in DNABERT2_KEYS):
        raise ConversionError(
            "DNABERT-2 (ALiBi attention bias, GEGLU feed-forward) is not supported: genolong's encoder has "
            "learned absolute positions and a GELU feed-forward"
        )
    if model_type not in CONVERTERS:
        raise ConversionError(
            f"model_type {model_type!r} is not supported (supported: {', '.join(CONVERTERS)})"
        )
    refuse_classifier(source)
    return CONVERTERS[model_type](source)


__all__ = ["CONVERTERS", "REFUSED", "ConversionError", "SourceCheckpoint", "convert_checkpoint", "convert_weights"]
