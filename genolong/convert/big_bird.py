"""transformers ``big_bird`` checkpoints (GENA-LM's ``gena-lm-bigbird-base-t2t`` among them).

Layers, embeddings and masked-LM head are BERT's (post-LN) and convert as BERT's. The attention
is genolong's ``bigbird`` with transformers' pattern (Zaheer et al. 2020, ITC;
``BigBirdBlockSparseAttention``): the first and last blocks global (``itc_ends``), three sliding
and ``num_random_blocks`` random blocks; transformers' eval-mode random layout, every random
block = the first (``random_layout="transformers_eval"``, so that outputs match; ``seeded`` to
fine-tune with random blocks); full attention up to ``(5 + 2 * num_random_blocks) * block_size``
tokens, where transformers falls back to ``original_full``; no attention dropout (transformers'
block-sparse attention has none). ``attention_type: original_full`` converts to ``full``.
"""

from __future__ import annotations

from typing import Any

from genolong.convert.bert import (
    IGNORED,
    bert_embeddings,
    bert_layers,
    check_absolute_positions,
    common_fields,
)
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights


def attention_fields(config: dict[str, Any]) -> dict[str, Any]:
    """GenolongConfig fields of the attention that reproduces transformers' BigBird."""
    kind = config.get("attention_type", "block_sparse")
    if kind == "original_full":
        return {"backbone": "full"}
    if kind != "block_sparse":
        raise ConversionError(f"attention_type {kind!r} is not a BigBird attention type")
    block, random = int(config.get("block_size", 64)), int(config.get("num_random_blocks", 3))
    return {
        "backbone": "bigbird",
        "block_size": block,
        "num_random_blocks": random,
        "num_window_blocks": 3,
        "num_global_blocks": 2,
        "global_token_location": "itc_ends",
        "random_layout": "transformers_eval",
        "full_attention_max_tokens": (5 + 2 * random) * block,
        "attention_probs_dropout_prob": 0.0,
    }


def convert_big_bird(source: SourceCheckpoint) -> tuple[dict[str, Any], dict, Weights]:
    """GenolongConfig fields and state dict of the encoder of a transformers BigBird checkpoint,
    and the source's weights (its head's still to take)."""
    config = source.config
    check_absolute_positions(config)
    if config.get("rescale_embeddings"):
        raise ConversionError("rescale_embeddings=true (Pegasus-style scaled embeddings) is not supported")
    weights = Weights(source.weights, "bert.", IGNORED)
    fields = common_fields(config, weights) | attention_fields(config)
    state = bert_embeddings(weights) | bert_layers(
        weights, fields["num_hidden_layers"], pre_layer_norm=False, zero_qkv_bias=not config.get("use_bias", True)
    )
    return fields, state, weights
