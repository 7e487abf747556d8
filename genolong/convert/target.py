"""The genolong side of a conversion: state-dict names (spelled here only), the model, the
output directory. Shapes: N = hidden size, I = intermediate size, V = vocabulary, P = positions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from genolong.classifier.directory import TaskInfo
from genolong.convert.source import ConversionError
from genolong.convert.weights_file import distinct_tensors, write_safetensors
from genolong.core.files import atomic_path, mark_directory
from genolong.core.progress import progress_bar
from genolong.dna.tokenizer import tokenizer_fingerprint
from genolong.model.configuration import GenolongConfig
from genolong.model.loading import WEIGHTS_FILE
from genolong.model.modeling import (
    GenolongForMaskedLM,
    GenolongForSequenceClassification,
    GenolongPreTrainedModel,
)

Linear = tuple[torch.Tensor, torch.Tensor | None]  # (weight (out, in), bias (out,) or None); a LayerNorm's (weight, bias)
ENCODER = "genolong.encoder"


def embedding_state(token: torch.Tensor, position: torch.Tensor | None, norm: Linear | None) -> dict[str, torch.Tensor]:
    """Token (V, N) and position (P, N) embeddings (None: rotary or ALiBi positions, no table) and
    their LayerNorm (None: no LayerNorm)."""
    state = {f"{ENCODER}.embeddings.token.weight": token}
    if position is not None:
        state[f"{ENCODER}.embeddings.position.weight"] = position
    if norm is not None:
        state |= _pair(f"{ENCODER}.embeddings.norm", norm)
    return state


def block_state(index: int, query: Linear, key: Linear, value: Linear, out: Linear, up: Linear, down: Linear,
                attention_norm: Linear | None, feed_forward_norm: Linear) -> dict[str, torch.Tensor]:
    """One :class:`~genolong.model.encoder.Block`: query, key, value (N, N) fused into ``qkv``
    (3N, N), attention output (N, N), feed-forward up (I, N) -- (2I, N) for a gated one, the
    gate's half first -- and down (N, I), and the two LayerNorms (``attention_norm`` None: layer 0
    without one). A bias may be None (a layer without biases)."""
    qkv_bias = None if query[1] is None else torch.cat([query[1], key[1], value[1]])
    return fused_block_state(index, (torch.cat([query[0], key[0], value[0]]), qkv_bias), out, up, down,
                             attention_norm, feed_forward_norm)


def fused_block_state(index: int, qkv: Linear, out: Linear, up: Linear, down: Linear,
                      attention_norm: Linear | None, feed_forward_norm: Linear) -> dict[str, torch.Tensor]:
    """:func:`block_state` from an already fused ``qkv`` (3N, N): queries, keys, values in that order."""
    prefix = f"{ENCODER}.blocks.{index}"
    state = (
        _pair(f"{prefix}.qkv", qkv)
        | _pair(f"{prefix}.out", out)
        | _pair(f"{prefix}.feed_forward.up", up)
        | _pair(f"{prefix}.feed_forward.down", down)
        | _pair(f"{prefix}.feed_forward_norm", feed_forward_norm)
    )
    return state if attention_norm is None else state | _pair(f"{prefix}.attention_norm", attention_norm)


def final_norm_state(norm: Linear) -> dict[str, torch.Tensor]:
    """The LayerNorm after the last Block."""
    return _pair(f"{ENCODER}.final_norm", norm)


def head_state(dense: Linear, norm: Linear, decoder: Linear) -> dict[str, torch.Tensor]:
    """The masked-LM head: dense (N, N), LayerNorm, decoder (V, N) with its bias (V,)."""
    return _pair("lm_head.dense", dense) | _pair("lm_head.norm", norm) | _pair("lm_head.decoder", decoder)


def classifier_state(dense: Linear, output: Linear, norm: Linear | None = None) -> dict[str, torch.Tensor]:
    """The classification head with a pooler: dense (N, N), output layer (C, N) with its bias (C,),
    and the LayerNorm after the pooler's activation when there is one (ModernBERT)."""
    state = _pair("classifier.dense", dense) | _pair("classifier.classifier", output)
    return state if norm is None else state | _pair("classifier.norm", norm)


def _pair(name: str, weight_and_bias: Linear) -> dict[str, torch.Tensor]:
    weight, bias = weight_and_bias
    return {f"{name}.weight": weight} | ({} if bias is None else {f"{name}.bias": bias})


def build_model(fields: dict[str, Any], state: dict[str, torch.Tensor]) -> GenolongPreTrainedModel:
    """A GenolongForMaskedLM (``state`` has the masked-LM head) or a
    GenolongForSequenceClassification with ``fields`` and every parameter from ``state`` (its own
    buffers kept); a ConversionError for a parameter left unset or an entry with no place."""
    if "lm_head.decoder.weight" in state:
        decoder = state["lm_head.decoder.weight"]
        fields["tie_word_embeddings"] = bool(torch.equal(decoder, state[f"{ENCODER}.embeddings.token.weight"]))
        model = GenolongForMaskedLM(GenolongConfig(**fields))
    else:
        model = GenolongForSequenceClassification(GenolongConfig(**fields))
    parameters = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    missing = sorted(parameters - set(state))
    unexpected = sorted(set(state) - set(model.state_dict()))
    if missing or unexpected:
        raise ConversionError(f"conversion left parameters unset {missing} or unplaced {unexpected}")
    model.load_state_dict(state, strict=False)
    return model.eval()


def write_model_directory(model: GenolongPreTrainedModel, tokenizer: PreTrainedTokenizerBase, out: str | Path,
                          task: TaskInfo | None = None) -> None:
    """``out``, written atomically: the files of :func:`~genolong.model.loading.save_model`
    (model.safetensors with a progress bar on stderr: tensors written / total), ``task`` (a
    classifier's ``genolong_task.json``) when given, and the run marker."""
    tokenizer.model_max_length = model.config.max_position_embeddings
    model.config.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)
    model.config.architectures = [type(model).__name__]
    model.config.dtype = model.dtype
    state = model.state_dict()
    with atomic_path(out, directory=True) as tmp:
        model.config.save_pretrained(str(tmp))
        with progress_bar(total=len(distinct_tensors(state)), desc="saving weights", unit=" tensors",
                          file=sys.stderr, disable=None) as progress:
            write_safetensors(state, Path(tmp) / WEIGHTS_FILE, progress)
        tokenizer.save_pretrained(str(tmp))
        if task is not None:
            task.write(Path(tmp))
        mark_directory(tmp, "convert")


def tokenizer_fields(tokenizer: PreTrainedTokenizerBase, vocab_rows: int) -> dict[str, Any]:
    """The special-token ids of the config, from the tokenizer, never from the source's
    config.json (GENA-LM's BigBird says ``sep_token_id: 66``, its tokenizer's [SEP] is 2); a
    ConversionError when the vocabulary does not match the embedding's ``vocab_rows`` or has no [PAD]."""
    if len(tokenizer) != vocab_rows:
        raise ConversionError(
            f"the tokenizer has {len(tokenizer)} tokens but the embedding matrix {vocab_rows} rows: "
            "they do not belong to the same model"
        )
    if tokenizer.pad_token_id is None:
        raise ConversionError("the tokenizer has no [PAD] token")
    ids = {name: getattr(tokenizer, f"{name}_token_id") for name in ("pad", "cls", "sep", "mask")}
    return {f"{name}_token_id": token_id for name, token_id in ids.items()}
