"""MosaicBERT checkpoints: DNABERT-2 (``zhihan1996/DNABERT-2-117M`` and its fine-tuned classifiers).

DNABERT-2 ships MosaicBERT's modelling code (``bert_layers.py``, MosaicML examples) instead of
a transformers architecture; its ``config.json`` has no ``model_type`` but MosaicBERT's
``alibi_starting_size``, by which :func:`~genolong.convert.source.infer_model_type` recognises
it. No code of the checkpoint is read. As the converted model computes it:

* embeddings: word + token type 0 (added into the word embeddings once; the masked-LM decoder
  keeps the original word embeddings, no longer tied), LayerNorm, no position embeddings;
* attention: a fused ``Wqkv`` (queries, keys, values), ALiBi biases ``-m_h |i - j|`` with Press
  et al.'s slopes (:mod:`genolong.attention.alibi`), padded keys excluded, post-LN;
* feed-forward: ``mlp.gated_layers`` (2I, N) without bias, ``gelu(first half) * second half``
  (exact GELU), ``mlp.wo`` with bias, post-LN (``mlp.layernorm``);
* heads: BERT's masked-LM head (``cls.predictions``) and BERT's pooler + classifier.

``max_position_embeddings`` stays the config's (512); ``convert --backbone full --max-length N``
raises it (ALiBi needs no new weights).
"""

from __future__ import annotations

from typing import Any

from genolong.convert import target
from genolong.convert.bert import genolong_activation
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights

#: Weights genolong has no use for: a masked-LM checkpoint's pooler, buffers of the source code.
IGNORED = ("pooler.", "embeddings.token_type_ids", "embeddings.position_ids", "encoder.alibi")


def convert_mosaic_bert(source: SourceCheckpoint) -> tuple[dict[str, Any], dict, Weights]:
    """GenolongConfig fields and state dict of the encoder of a MosaicBERT (DNABERT-2) checkpoint,
    and the source's weights (its head's still to take)."""
    config = source.config
    if config.get("position_embedding_type", "absolute") != "absolute" or config.get("is_decoder"):
        raise ConversionError("a MosaicBERT config with position_embedding_type or is_decoder set is not DNABERT-2's")
    weights = Weights(source.weights, "bert.", IGNORED)
    word = weights.take("embeddings.word_embeddings.weight")
    token_type = weights.take("embeddings.token_type_embeddings.weight")
    if "encoder.layer.0.mlp.gated_layers.weight" not in weights:
        raise ConversionError("config.json has MosaicBERT's alibi_starting_size (DNABERT-2) but the weights have no "
                              "gated feed-forward (encoder.layer.0.mlp.gated_layers)")
    gated = weights.tensors["encoder.layer.0.mlp.gated_layers.weight"].shape[0]
    if gated != 2 * config["intermediate_size"]:
        raise ConversionError(f"mlp.gated_layers has {gated} outputs, not 2 x intermediate_size "
                              f"({config['intermediate_size']}): not a gated MosaicBERT")
    fields = {
        "backbone": "full",
        "vocab_size": word.shape[0],
        "hidden_size": word.shape[1],
        "num_hidden_layers": config["num_hidden_layers"],
        "num_attention_heads": config["num_attention_heads"],
        "intermediate_size": config["intermediate_size"],
        "hidden_act": genolong_activation(config.get("hidden_act", "gelu")),
        "hidden_dropout_prob": config.get("hidden_dropout_prob", 0.1),
        "attention_probs_dropout_prob": config.get("attention_probs_dropout_prob", 0.0),
        "max_position_embeddings": max(config.get("max_position_embeddings", 512), config.get("alibi_starting_size", 0)),
        "layer_norm_eps": config.get("layer_norm_eps", 1e-12),
        "initializer_range": config.get("initializer_range", 0.02),
        "position_embedding_type": "alibi",
        "gated_feed_forward": True,
        "mlp_in_bias": False,
    }
    state = target.embedding_state(word + token_type[0], None, weights.linear("embeddings.LayerNorm"))
    for i in range(fields["num_hidden_layers"]):
        layer = f"encoder.layer.{i}"
        state |= target.fused_block_state(
            i, weights.linear(f"{layer}.attention.self.Wqkv"),
            out=weights.linear(f"{layer}.attention.output.dense"),
            up=weights.linear(f"{layer}.mlp.gated_layers"), down=weights.linear(f"{layer}.mlp.wo"),
            attention_norm=weights.linear(f"{layer}.attention.output.LayerNorm"),
            feed_forward_norm=weights.linear(f"{layer}.mlp.layernorm"),
        )
    return fields, state, weights
