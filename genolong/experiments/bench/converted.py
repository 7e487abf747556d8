"""Benchmark models for converted checkpoints: transformers' model next to its genolong conversion.

``converted-bigbird``, ``converted-bert`` and ``converted-esm`` build the transformers model
(``hf-bigbird``, ``hf-bert``, ``hf-esm``) with the run's size and random weights, convert its
weights in memory with :func:`genolong.convert.convert_weights` (what
``genolong convert`` does, without the files), and measure the genolong model: the same
weights and the same outputs, so the times compare implementations only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from genolong.convert import SourceCheckpoint, convert_weights
from genolong.convert.target import build_model

#: Converted model -> the transformers peer it is converted from.
CONVERTED = {"converted-bigbird": "hf-bigbird", "converted-bert": "hf-bert", "converted-esm": "hf-esm"}


def hf_esm(size, length: int, mlm: bool):
    """transformers' ESM with absolute positions (Nucleotide Transformer v1's layout), SDPA attention."""
    from transformers import EsmConfig, EsmForMaskedLM, EsmModel

    config = EsmConfig(max_position_embeddings=length + 2, pad_token_id=1, mask_token_id=4,
                       position_embedding_type="absolute", token_dropout=False, emb_layer_norm_before=False,
                       attn_implementation="sdpa", **asdict(size))
    return (EsmForMaskedLM if mlm else EsmModel)(config), {}


def converted_model(peer: Callable, size, length: int, mlm: bool):
    """The genolong conversion of ``peer``'s masked-LM model (the bare encoder unless ``mlm``)."""
    source_model, extra = peer(size, length, True)
    config = source_model.config.to_dict()
    source = SourceCheckpoint(Path("."), config, source_model.state_dict(), tokenizer=None)
    fields, state = convert_weights(source)
    model = build_model(fields | {"pad_token_id": config.get("pad_token_id") or 0}, state)
    return (model if mlm else model.genolong), extra


def converted_builders(peers: dict[str, Callable]) -> dict[str, Callable[..., Any]]:
    """Builders of the converted models, given the peers' builders by name."""
    return {
        name: (lambda size, length, mlm, peer=peers[peer_name]: converted_model(peer, size, length, mlm))
        for name, peer_name in CONVERTED.items()
    }
