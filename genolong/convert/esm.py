"""transformers ``esm`` checkpoints: Nucleotide Transformer v1 (absolute positions) and v2
(rotary positions, a SwiGLU feed-forward without biases).

ESM is pre-LN (``attention.LayerNorm`` and the layer's ``LayerNorm``), with a final LayerNorm
(``emb_layer_norm_after``) and an embedding LayerNorm only with ``emb_layer_norm_before``.
Queries scaled by ``1 / sqrt(D)`` before the rotation give the same scores as scaled after.

* **Positions.** ``absolute``: learned rows counted from ``pad_token_id + 1`` (fairseq's
  convention): genolong's position ``t`` is ESM's row ``t + pad_token_id + 1``. ``rotary``:
  rotate-half over the whole head dimension, positions 0, 1, ..., base ``rope_theta`` (else
  10,000, as ESM's code fixes it); the input length limit stays
  ``max_position_embeddings - pad_token_id - 1``.
* **Feed-forward.** ESM's is ``down(gelu(up(x)))``; Nucleotide Transformer v2's a GLU,
  ``down(silu(u1) * u2)`` with ``intermediate.dense`` giving 2 x ``intermediate_size`` features
  ``[u1; u2]``, biases per ``add_bias_fnn``. The gate is read from the weights (2 I rows: gated,
  I rows: plain). The masked-LM head keeps ESM's exact GELU.

Token dropout (its eval-time rescaling depends on the input's mask ratio) and ESMFold are refused.
"""

from __future__ import annotations

from typing import Any

import torch

from genolong.convert import target
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights
from genolong.model.rotary import RotaryEmbedding

IGNORED = ("embeddings.position_ids", "contact_head.")
#: The position encodings genolong computes as ESM does.
POSITION_TYPES = ("absolute", "rotary")
#: ESM's rotary base when the config does not set ``rope_theta``.
ROTARY_BASE = 10000.0


def check_esm_config(config: dict[str, Any]) -> None:
    """Refuse the ESM variants genolong's encoder does not compute exactly."""
    kind = config.get("position_embedding_type", "absolute")
    if kind not in POSITION_TYPES:
        raise ConversionError(f"ESM with position_embedding_type {kind!r} is not supported "
                              f"(supported: {', '.join(POSITION_TYPES)})")
    if config.get("token_dropout"):
        raise ConversionError("ESM token_dropout=true rescales embeddings by the input's mask ratio; not supported")
    if config.get("is_folding_model"):
        raise ConversionError("ESMFold checkpoints are not supported")


def gated_feed_forward(config: dict[str, Any], weights: Weights) -> bool:
    """Whether the layers' ``intermediate.dense`` weights are a GLU's (2 I, N) rather than plain (I, N)."""
    size = int(config["intermediate_size"])
    names = [name for name in weights.tensors if name.endswith(".intermediate.dense.weight")]
    rows = {weights.tensors[name].shape[0] for name in names}
    if len(rows) != 1 or not rows <= {size, 2 * size}:
        raise ConversionError(f"intermediate.dense has {sorted(rows)} output features; intermediate_size {size} "
                              f"says {size} (ESM) or {2 * size} (a gated feed-forward, Nucleotide Transformer v2)")
    return rows == {2 * size}


def rotary_base(config: dict[str, Any], weights: Weights) -> float:
    """The rotary base, ``rope_theta`` else 10,000, checked against every saved
    ``rotary_embeddings.inv_freq`` buffer (older transformers saved one per layer)."""
    base = float(config.get("rope_theta", ROTARY_BASE))
    head_dim = int(config["hidden_size"]) // int(config["num_attention_heads"])
    expected = RotaryEmbedding(head_dim, base).inv_freq
    for name in [name for name in weights.tensors if name.endswith("rotary_embeddings.inv_freq")]:
        saved = weights.take(name)
        if saved.shape != expected.shape or not torch.allclose(saved, expected, rtol=1e-5, atol=0):
            raise ConversionError(f"{name} holds rotary frequencies of another base than the config's {base:g}")
    return base


def convert_esm(source: SourceCheckpoint) -> tuple[dict[str, Any], dict, Weights]:
    """GenolongConfig fields and state dict of the encoder of an ESM checkpoint, and the source's
    weights (its head's still to take)."""
    config = source.config
    check_esm_config(config)
    weights = Weights(source.weights, "esm.", IGNORED)
    token = weights.take("embeddings.word_embeddings.weight")
    offset = int(config.get("pad_token_id", 1)) + 1
    rotary = config.get("position_embedding_type", "absolute") == "rotary"
    position = None if rotary else weights.take("embeddings.position_embeddings.weight")[offset:]
    norm = weights.linear("embeddings.layer_norm") if config.get("emb_layer_norm_before") else None
    layers = int(config["num_hidden_layers"])
    gated = gated_feed_forward(config, weights)
    mlp_bias = bool(config.get("add_bias_fnn", True))
    fields = {
        "backbone": "full",
        "vocab_size": token.shape[0],
        "hidden_size": token.shape[1],
        "num_hidden_layers": layers,
        "num_attention_heads": config["num_attention_heads"],
        "intermediate_size": config["intermediate_size"],
        "hidden_act": "silu" if gated else "gelu",
        "head_act": "gelu",
        "gated_feed_forward": gated,
        "mlp_in_bias": mlp_bias,
        "mlp_out_bias": mlp_bias,
        "hidden_dropout_prob": config.get("hidden_dropout_prob", 0.0),
        "attention_probs_dropout_prob": config.get("attention_probs_dropout_prob", 0.0),
        "max_position_embeddings": int(config["max_position_embeddings"]) - offset if rotary else position.shape[0],
        "layer_norm_eps": config.get("layer_norm_eps", 1e-12),
        "pre_layer_norm": True,
        "final_layer_norm": True,
        "embedding_layer_norm": norm is not None,
    }
    if rotary:
        fields |= {"position_embedding_type": "rotary", "rotary_base": rotary_base(config, weights)}
    state = target.embedding_state(token, position, norm)
    for i in range(layers):
        layer = f"encoder.layer.{i}"
        state |= target.block_state(
            i, *(weights.linear(f"{layer}.attention.self.{name}") for name in ("query", "key", "value")),
            out=weights.linear(f"{layer}.attention.output.dense"),
            up=weights.linear(f"{layer}.intermediate.dense"), down=weights.linear(f"{layer}.output.dense"),
            attention_norm=weights.linear(f"{layer}.attention.LayerNorm"),
            feed_forward_norm=weights.linear(f"{layer}.LayerNorm"),
        )
    state |= target.final_norm_state(weights.linear("encoder.emb_layer_norm_after"))
    return fields, state, weights


def esm_mlm_head(weights: Weights) -> dict:
    """``lm_head``: dense, LayerNorm and the decoder (the token embedding when not saved)."""
    if "lm_head.dense.weight" not in weights:
        raise ConversionError("the checkpoint has no masked-LM head (lm_head)")
    decoder = weights.take_first("lm_head.decoder.weight", "embeddings.word_embeddings.weight")
    return target.head_state(weights.linear("lm_head.dense"), weights.linear("lm_head.layer_norm"),
                             (decoder, weights.take("lm_head.bias")))
