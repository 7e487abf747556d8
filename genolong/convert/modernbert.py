"""transformers ``modernbert`` checkpoints (ModernBERT; AIRI's modernGENA).

ModernBERT (Warner et al. 2024) is a pre-LN encoder without position table and, in its
published configs, without biases:

* ``tok_embeddings`` then ``embeddings.norm``; layer ``i``: ``x + Wo(attention(attn_norm(x)))``
  then ``x + mlp(mlp_norm(x))``, no ``attn_norm`` in layer 0, a fused ``Wqkv`` (q, k, v);
* attention: rotary (rotate-half, every dimension); a ``full_attention`` layer sees every token
  with base ``rope_parameters.full_attention.rope_theta``, a ``sliding_attention`` one the band
  ``|i - j| <= local_attention // 2`` with ``rope_parameters.sliding_attention.rope_theta``
  (older configs' ``global_attn_every_n_layers``, ``global_rope_theta`` and ``local_rope_theta``
  are read by transformers' own ``ModernBertConfig``);
* MLP: GeGLU, ``Wo(act(input) * gate)`` with ``input, gate = Wi(x).chunk(2)``; ``final_norm``;
* masked-LM head: ``decoder(head.norm(act(head.dense(x))))``, ``act = classifier_activation``,
  the decoder tied; sequence classifier: [CLS] or the masked mean (``classifier_pooling``), the
  same ``head``, then ``classifier`` (:mod:`.classification`).

In genolong's terms the sliding-window layers are ``longformer`` layers of ``attention_window =
2 * (local_attention // 2)`` (the same band) without global tokens, the global layers listed in
``full_attention_layers``. A rope scaling other than ``default``, a window of no neighbour, or
other layer types are refused.
"""

from __future__ import annotations

import logging
from typing import Any

from transformers import ModernBertConfig

from genolong.convert import target
from genolong.convert.bert import genolong_activation
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights

log = logging.getLogger(__name__)

FULL, SLIDING = "full_attention", "sliding_attention"
SPECIAL_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")


def read_config(config: dict[str, Any]) -> ModernBertConfig:
    """``config.json`` as transformers' ModernBertConfig reads it (defaults, legacy keys), without
    its special-token ids, which come from the tokenizer (modernGENA's ``bos_token_id: 50281``
    lies outside its vocabulary)."""
    kept = {k: v for k, v in config.items() if k != "transformers_version"} | dict.fromkeys(SPECIAL_IDS)
    try:
        return ModernBertConfig.from_dict(kept)
    except (TypeError, ValueError, KeyError) as err:
        raise ConversionError(f"config.json is not a ModernBERT config transformers can read ({err})") from None


def rotary_bases(config: ModernBertConfig) -> dict[str, float]:
    """The rotary base of each layer type; ConversionError for a scaled (non-default) rope."""
    parameters = config.rope_parameters or {}
    bases = {}
    for layer_type in (FULL, SLIDING):
        rope = parameters.get(layer_type) or {}
        if rope.get("rope_type", "default") != "default":
            raise ConversionError(f"ModernBERT with rope_type {rope['rope_type']!r} ({layer_type}) is not supported: "
                                  "genolong's rotary positions are unscaled")
        bases[layer_type] = rope.get("rope_theta")
    if bases[FULL] is None:
        raise ConversionError("config.json gives no rope_theta for the global (full_attention) layers")
    if bases[SLIDING] is None:  # transformers 4: a null local_rope_theta means the global base
        bases[SLIDING] = bases[FULL]
    return bases


def attention_fields(config: ModernBertConfig) -> dict[str, Any]:
    """GenolongConfig fields of the per-layer attention plan and the rotary bases."""
    layer_types = list(config.layer_types)
    unknown = sorted(set(layer_types) - {FULL, SLIDING})
    if unknown:
        raise ConversionError(f"ModernBERT layer_types {unknown} are not supported (only {FULL}, {SLIDING})")
    bases = rotary_bases(config)
    full = [i for i, kind in enumerate(layer_types) if kind == FULL]
    fields: dict[str, Any] = {"position_embedding_type": "rotary",
                              "rotary_base": float(bases[FULL] if full else bases[SLIDING])}
    if len(full) == len(layer_types):
        return fields | {"backbone": "full"}
    one_sided = int(config.local_attention) // 2
    if one_sided < 1:
        raise ConversionError(f"ModernBERT local_attention {config.local_attention} lets a token see no neighbour; "
                              "genolong's longformer window needs at least one token on each side")
    fields |= {"backbone": "longformer", "attention_window": 2 * one_sided, "num_global_tokens": 0}
    if full:
        fields |= {"full_attention_layers": full, "local_rotary_base": float(bases[SLIDING])}
    return fields


def convert_modernbert(source: SourceCheckpoint) -> tuple[dict[str, Any], dict, Weights]:
    """GenolongConfig fields and state dict of the encoder of a ModernBERT checkpoint, and the
    source's weights (its head's still to take)."""
    config = read_config(source.config)
    weights = Weights(source.weights, "model.")
    if source.tokenizer is not None:  # weights converted in memory (benchmarks) keep every row
        drop_padding_rows(weights, len(source.tokenizer))
    token = weights.take("embeddings.tok_embeddings.weight")
    layers = int(config.num_hidden_layers)
    fields = {
        "vocab_size": token.shape[0],
        "hidden_size": token.shape[1],
        "num_hidden_layers": layers,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": genolong_activation(config.hidden_activation),
        "hidden_dropout_prob": float(config.mlp_dropout),
        "attention_probs_dropout_prob": float(config.attention_dropout),
        "classifier_dropout": float(config.classifier_dropout),
        "classifier_pooling": config.classifier_pooling,
        "max_position_embeddings": config.max_position_embeddings,
        "layer_norm_eps": config.norm_eps,
        "initializer_range": config.initializer_range,
        "pre_layer_norm": True,
        "final_layer_norm": True,
        "embedding_layer_norm": True,
        "first_layer_attention_norm": False,
        "gated_feed_forward": True,
        "attention_bias": bool(config.attention_bias),
        "mlp_in_bias": bool(config.mlp_bias),
        "mlp_out_bias": bool(config.mlp_bias),
        "norm_bias": bool(config.norm_bias),
        "head_act": genolong_activation(config.classifier_activation),
        "head_dense_bias": bool(config.classifier_bias),
    } | attention_fields(config)
    state = target.embedding_state(token, None, weights.linear("embeddings.norm"))
    for i in range(layers):
        layer = f"layers.{i}"
        state |= target.fused_block_state(
            i, weights.linear(f"{layer}.attn.Wqkv"), out=weights.linear(f"{layer}.attn.Wo"),
            up=weights.linear(f"{layer}.mlp.Wi"), down=weights.linear(f"{layer}.mlp.Wo"),
            attention_norm=weights.linear(f"{layer}.attn_norm") if i else None,
            feed_forward_norm=weights.linear(f"{layer}.mlp_norm"),
        )
    state |= target.final_norm_state(weights.linear("final_norm"))
    return fields, state, weights


def drop_padding_rows(weights: Weights, tokens: int) -> None:
    """Cut the vocabulary-indexed tensors (token embedding, decoder and its bias) of ``weights``
    to the tokenizer's ``tokens`` rows: ModernBERT pads the vocabulary to a multiple of 64
    (modernGENA: 32,768 rows for 32,000 tokens). No input reaches those rows and every real
    token's logit is unchanged; the masked-LM softmax is renormalised without their share."""
    rows = weights.tensors["embeddings.tok_embeddings.weight"].shape[0]
    if rows <= tokens:
        return
    for name in ("embeddings.tok_embeddings.weight", "decoder.weight", "decoder.bias"):
        if name in weights:
            weights.tensors[name] = weights.tensors[name][:tokens]
    log.info("embedding rows %d..%d have no token in the tokenizer (vocabulary padding): dropped", tokens, rows - 1)


def modernbert_mlm_head(weights: Weights) -> dict:
    """``head`` (dense, LayerNorm) and ``decoder`` (the token embedding when not saved; a zero
    bias for ``decoder_bias: false``)."""
    if "head.dense.weight" not in weights:
        raise ConversionError("the checkpoint has no masked-LM head (head.dense)")
    decoder = weights.take_first("decoder.weight", "embeddings.tok_embeddings.weight")
    bias = weights.take("decoder.bias") if "decoder.bias" in weights else decoder.new_zeros(decoder.shape[0])
    return target.head_state(weights.linear("head.dense"), weights.linear("head.norm"), (decoder, bias))
