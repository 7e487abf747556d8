"""transformers ``esm`` checkpoints with absolute positions (Nucleotide Transformer v1).

ESM is a pre-LN encoder: per layer ``x + attention(LN(x))`` (``attention.LayerNorm``) then
``x + FFN(LN(x))`` (the layer's ``LayerNorm``), a final LayerNorm (``emb_layer_norm_after``), and
an embedding LayerNorm only when ``emb_layer_norm_before`` is set. Positions count from
``pad_token_id + 1`` (fairseq's convention), so genolong's position ``t`` is ESM's row
``t + pad_token_id + 1``. Rotary positions (ESM-2, Nucleotide Transformer v2), token dropout
(its eval-time rescaling depends on the input's mask ratio) and ESMFold are refused.
"""

from __future__ import annotations

from typing import Any

from genolong.convert import target
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights

IGNORED = ("embeddings.position_ids", "contact_head.")


def check_esm_config(config: dict[str, Any]) -> None:
    """Refuse the ESM variants genolong's encoder does not compute exactly."""
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(
            f"ESM with position_embedding_type {config['position_embedding_type']!r} (ESM-2, Nucleotide "
            "Transformer v2) is not supported: genolong's encoder has learned absolute positions only"
        )
    if config.get("token_dropout"):
        raise ConversionError("ESM token_dropout=true rescales embeddings by the input's mask ratio; not supported")
    if config.get("is_folding_model"):
        raise ConversionError("ESMFold checkpoints are not supported")


def convert_esm(source: SourceCheckpoint) -> tuple[dict[str, Any], dict, Weights]:
    """GenolongConfig fields and state dict of the encoder of an ESM checkpoint with absolute
    positions, and the source's weights (its head's still to take)."""
    config = source.config
    check_esm_config(config)
    weights = Weights(source.weights, "esm.", IGNORED)
    token = weights.take("embeddings.word_embeddings.weight")
    offset = int(config.get("pad_token_id", 1)) + 1
    position = weights.take("embeddings.position_embeddings.weight")[offset:]
    norm = weights.linear("embeddings.layer_norm") if config.get("emb_layer_norm_before") else None
    layers = int(config["num_hidden_layers"])
    fields = {
        "backbone": "full",
        "vocab_size": token.shape[0],
        "hidden_size": token.shape[1],
        "num_hidden_layers": layers,
        "num_attention_heads": config["num_attention_heads"],
        "intermediate_size": config["intermediate_size"],
        "hidden_act": "gelu",
        "hidden_dropout_prob": config.get("hidden_dropout_prob", 0.0),
        "attention_probs_dropout_prob": config.get("attention_probs_dropout_prob", 0.0),
        "max_position_embeddings": position.shape[0],
        "layer_norm_eps": config.get("layer_norm_eps", 1e-12),
        "pre_layer_norm": True,
        "final_layer_norm": True,
        "embedding_layer_norm": norm is not None,
    }
    state = target.embedding_state(token, position, norm)
    for i in range(layers):
        layer = f"encoder.layer.{i}"
        state |= target.block_state(
            i,
            *(weights.linear(f"{layer}.attention.self.{name}") for name in ("query", "key", "value")),
            out=weights.linear(f"{layer}.attention.output.dense"),
            up=weights.linear(f"{layer}.intermediate.dense"),
            down=weights.linear(f"{layer}.output.dense"),
            attention_norm=weights.linear(f"{layer}.attention.LayerNorm"),
            feed_forward_norm=weights.linear(f"{layer}.LayerNorm"),
        )
    state |= target.final_norm_state(weights.linear("encoder.emb_layer_norm_after"))
    return fields, state, weights


def esm_mlm_head(weights: Weights) -> dict:
    """``lm_head``: dense, LayerNorm and the decoder (the token embedding when not saved)."""
    if "lm_head.dense.weight" not in weights:
        raise ConversionError("the checkpoint has no masked-LM head (lm_head)")
    decoder_name = "lm_head.decoder.weight" if "lm_head.decoder.weight" in weights else "embeddings.word_embeddings.weight"
    return target.head_state(
        weights.linear("lm_head.dense"), weights.linear("lm_head.layer_norm"),
        (weights.take(decoder_name), weights.take("lm_head.bias")),
    )
