"""Benchmark models for converted checkpoints: transformers' model (or, for DNABERT-2, whose code is
not in transformers, :mod:`genolong.experiments.bench.mosaic_bert`) with the run's size and random
weights, converted in memory with :func:`genolong.convert.convert_weights` (``genolong convert``
without the files): the same weights and outputs, so the times compare implementations only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import transformers

from genolong.convert import SourceCheckpoint, convert_weights
from genolong.convert.long import LongSpec, make_long
from genolong.convert.target import build_model
from genolong.experiments.bench.mosaic_bert import MosaicBertEncoder, MosaicBertReference
from genolong.experiments.bench.nucleotide_transformer import with_swiglu

#: Converted model -> the peer it is converted from.
CONVERTED = {"converted-bigbird": "hf-bigbird", "converted-bert": "hf-bert", "converted-esm": "hf-esm",
             "converted-dnabert2": "ref-dnabert2", "converted-modernbert": "hf-modernbert", "converted-ntv2": "hf-ntv2"}
#: The converted published models made long (``--backbone lsg``) to the run's length, past their sources.
LONG = {"lsg-dnabert2": "ref-dnabert2", "lsg-modernbert": "hf-modernbert", "lsg-ntv2": "hf-ntv2"}
#: The trained positions of the models that ``LONG`` makes long.
TRAINED_POSITIONS = {"ref-dnabert2": 512, "hf-modernbert": 1024, "hf-ntv2": 2048}
#: ModernBERT's local window and global-layer period (ModernBERT-base, modernGENA), and modernGENA's
#: rotary base in both kinds of layer (ModernBERT-base's global layers use 160,000).
MODERNBERT_WINDOW, MODERNBERT_GLOBAL_EVERY, MODERNGENA_ROPE_BASE = 128, 3, 10000.0


def hf_esm(size, length: int, mlm: bool):
    """transformers' ESM with absolute positions (Nucleotide Transformer v1's layout), SDPA attention."""
    config = transformers.EsmConfig(max_position_embeddings=length + 2, pad_token_id=1, mask_token_id=4,
                                    position_embedding_type="absolute", token_dropout=False,
                                    emb_layer_norm_before=False, attn_implementation="sdpa", **asdict(size))
    return (transformers.EsmForMaskedLM if mlm else transformers.EsmModel)(config), {}


def ref_dnabert2(size, length: int, mlm: bool):
    """DNABERT-2's architecture in plain PyTorch (:mod:`genolong.experiments.bench.mosaic_bert`)."""
    config = {"type_vocab_size": 2, "layer_norm_eps": 1e-12, "alibi_starting_size": 512,
              "max_position_embeddings": max(length, 512), "hidden_act": "gelu", **asdict(size)}
    model = MosaicBertReference(config)
    return (model if mlm else MosaicBertEncoder(model)), {}


def hf_modernbert(size, length: int, mlm: bool):
    """transformers' ModernBERT as modernGENA configures it (:data:`MODERNBERT_WINDOW`), SDPA attention."""
    config = transformers.ModernBertConfig(
        max_position_embeddings=length, local_attention=MODERNBERT_WINDOW,
        global_attn_every_n_layers=MODERNBERT_GLOBAL_EVERY, global_rope_theta=MODERNGENA_ROPE_BASE,
        local_rope_theta=MODERNGENA_ROPE_BASE, pad_token_id=3, cls_token_id=1, sep_token_id=2,
        bos_token_id=1, eos_token_id=2, attn_implementation="sdpa", **asdict(size),
    )
    return (transformers.ModernBertForMaskedLM if mlm else transformers.ModernBertModel)(config), {}


def hf_ntv2(size, length: int, mlm: bool):
    """Nucleotide Transformer v2: transformers' ESM with rotary positions and NT v2's SwiGLU
    feed-forward (:mod:`genolong.experiments.bench.nucleotide_transformer`), SDPA attention."""
    config = transformers.EsmConfig(max_position_embeddings=length + 2, pad_token_id=1, mask_token_id=2,
                                    position_embedding_type="rotary", token_dropout=False,
                                    emb_layer_norm_before=False, attn_implementation="sdpa", **asdict(size))
    model = with_swiglu(transformers.EsmForMaskedLM(config))
    return (model if mlm else model.esm), {}


#: The peers the converted models are built from, by benchmark name.
SOURCES = {"hf-esm": hf_esm, "ref-dnabert2": ref_dnabert2, "hf-modernbert": hf_modernbert, "hf-ntv2": hf_ntv2}


def converted_model(peer: Callable, size, length: int, mlm: bool, long_from: int | None = None):
    """The genolong conversion of ``peer``'s masked-LM model (the bare encoder unless ``mlm``); with
    ``long_from`` source positions, made long to ``length`` with LSG (as ``convert --backbone lsg``)."""
    source_model, extra = peer(size, long_from or length, True)
    config = source_model.config.to_dict()
    source = SourceCheckpoint(Path("."), config, source_model.state_dict(), tokenizer=None)
    fields, state = convert_weights(source)
    fields |= {"pad_token_id": config.get("pad_token_id") or 0}
    if long_from is not None:
        fields, state = make_long(fields, state, LongSpec("lsg", length))
    model = build_model(fields, state)
    return (model if mlm else model.genolong), extra


def converted_builders(peers: dict[str, Callable]) -> dict[str, Callable[..., Any]]:
    """Builders of the converted models (and of those made long) from the peers' builders by name."""
    converted = {name: partial(converted_model, peers[source]) for name, source in CONVERTED.items()}
    return converted | {name: partial(converted_model, peers[source], long_from=TRAINED_POSITIONS[source])
                        for name, source in LONG.items()}
