"""BERT checkpoints: transformers' post-LN ``bert`` and GENA-LM's pre-LN BERT.

GENA-LM's BERTs (AIRI-Institute/GENA_LM, ``src/gena_lm/modeling_bert.py``) say ``model_type:
bert`` but with ``pre_layer_norm: true`` normalise *before* attention (``pre_attention_ln``) and
the feed-forward (``post_attention_ln``), with no LayerNorm after either, and add a final
LayerNorm (``last_layer_ln``) when ``last_layer_norm`` is set (default: ``pre_layer_norm``).
transformers' ``BertModel`` ignores both keys, so the layout is read from the weights, and a
config that disagrees with them is refused.

Every genolong input is one segment, so token-type row 0 is added into the position table once.
"""

from __future__ import annotations

from typing import Any

from genolong.convert import target
from genolong.convert.source import ConversionError, SourceCheckpoint, Weights

#: Weights genolong has no use for: the NSP head, the pooler (a sequence classifier's is taken
#: by :mod:`.classification`), position-id buffers.
IGNORED = ("cls.seq_relationship.", "pooler.", "embeddings.position_ids", "embeddings.token_type_ids")
PRE_LN_KEY = "encoder.layer.0.pre_attention_ln.weight"
POST_LN_KEY = "encoder.layer.0.attention.output.LayerNorm.weight"
FINAL_LN = "encoder.last_layer_ln"


def layer_norm_layout(weights: Weights, config: dict[str, Any]) -> tuple[bool, bool]:
    """``(pre_layer_norm, final_layer_norm)`` as the weights have them; a ConversionError when
    they have neither or both layouts, or the config claims another."""
    pre, post = PRE_LN_KEY in weights, POST_LN_KEY in weights
    if pre == post:
        raise ConversionError(
            "the weights have neither a post-LN BERT layer (attention.output.LayerNorm) nor a pre-LN one "
            "(pre_attention_ln)" if not pre else "the weights mix post-LN and pre-LN BERT layers"
        )
    claimed = bool(config.get("pre_layer_norm", False))
    if claimed != pre:
        raise ConversionError(
            f"config.json describes a {'pre' if claimed else 'post'}-LN BERT but the weights are "
            f"{'pre' if pre else 'post'}-LN (pre_layer_norm={claimed}; layer 0 has "
            f"{'pre_attention_ln' if pre else 'attention.output.LayerNorm'})"
        )
    final = f"{FINAL_LN}.weight" in weights
    claimed_final = bool(config.get("last_layer_norm", claimed))  # GENA-LM's default: pre_layer_norm
    if final != claimed_final:
        raise ConversionError(
            f"config.json {'asks for' if claimed_final else 'has no'} a final LayerNorm (last_layer_norm) "
            f"but the weights {'have' if final else 'lack'} {FINAL_LN}"
        )
    return pre, final


def bert_layers(weights: Weights, num_layers: int, pre_layer_norm: bool, zero_qkv_bias: bool = False) -> dict:
    """genolong Blocks from transformers' ``encoder.layer.{i}`` (BERT, BigBird, GENA-LM pre-LN)."""
    state = {}
    for i in range(num_layers):
        layer = f"encoder.layer.{i}"
        if pre_layer_norm:
            norms = weights.linear(f"{layer}.pre_attention_ln"), weights.linear(f"{layer}.post_attention_ln")
        else:
            norms = weights.linear(f"{layer}.attention.output.LayerNorm"), weights.linear(f"{layer}.output.LayerNorm")
        state |= target.block_state(
            i,
            *(_projection(weights, f"{layer}.attention.self.{name}", zero_qkv_bias)
              for name in ("query", "key", "value")),
            out=weights.linear(f"{layer}.attention.output.dense"),
            up=weights.linear(f"{layer}.intermediate.dense"),
            down=weights.linear(f"{layer}.output.dense"),
            attention_norm=norms[0],
            feed_forward_norm=norms[1],
        )
    return state


def _projection(weights: Weights, name: str, zero_bias: bool) -> target.Linear:
    weight = weights.take(f"{name}.weight")
    return weight, weight.new_zeros(weight.shape[0]) if zero_bias else weights.take(f"{name}.bias")


def bert_embeddings(weights: Weights) -> dict:
    """Word, position (+ token type 0, folded in) embeddings and their LayerNorm."""
    position = weights.take("embeddings.position_embeddings.weight")
    token_type = weights.take("embeddings.token_type_embeddings.weight")
    return target.embedding_state(weights.take("embeddings.word_embeddings.weight"), position + token_type[0],
                                  weights.linear("embeddings.LayerNorm"))


def bert_mlm_head(weights: Weights) -> dict:
    """``cls.predictions``: transform (dense, LayerNorm) and the decoder, tied when not saved."""
    if "cls.predictions.transform.dense.weight" not in weights:
        raise ConversionError(
            "the checkpoint has no masked-LM head (cls.predictions); convert the pretrained masked-LM "
            "checkpoint and fine-tune it with `genolong promoter|chromatin finetune`"
        )
    decoder = weights.take_first("cls.predictions.decoder.weight", "embeddings.word_embeddings.weight")
    bias_name = "cls.predictions.bias" if "cls.predictions.bias" in weights else "cls.predictions.decoder.bias"
    if bias_name == "cls.predictions.bias" and "cls.predictions.decoder.bias" in weights:
        weights.take("cls.predictions.decoder.bias")  # the same tensor, saved twice
    return target.head_state(weights.linear("cls.predictions.transform.dense"),
                             weights.linear("cls.predictions.transform.LayerNorm"),
                             (decoder, weights.take(bias_name)))


def check_absolute_positions(config: dict[str, Any]) -> None:
    """Refuse position encodings other than learned absolute ones, and DeepSpeed sparse attention."""
    kind = config.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise ConversionError(f"position_embedding_type {kind!r} is not supported: genolong's encoder has "
                              "learned absolute positions only")
    if config.get("sparse_config_cls") or config.get("sparse_attention"):
        raise ConversionError("DeepSpeed sparse attention (sparse_config_cls): its random block layout is "
                              "not stored in the checkpoint, so no conversion can reproduce it")


#: transformers' activation names (``ACT2FN``) -> genolong's (``ACTIVATIONS``), where they compute the same.
ACTIVATION_NAMES = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                    "silu": "silu", "swish": "silu"}


def genolong_activation(hidden_act: str | None) -> str:
    """genolong's name of transformers' activation ``hidden_act``; ConversionError when it has none."""
    if hidden_act not in ACTIVATION_NAMES:
        raise ConversionError(f"hidden_act {hidden_act!r} is not supported")
    return ACTIVATION_NAMES[hidden_act]


def common_fields(config: dict[str, Any], weights: Weights) -> dict[str, Any]:
    """GenolongConfig fields shared by BERT and BigBird, with the sizes read from the weights."""
    vocab, hidden = weights.tensors["embeddings.word_embeddings.weight"].shape
    activation = genolong_activation(config.get("hidden_act"))
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise ConversionError("decoder checkpoints (is_decoder, add_cross_attention) are not supported")
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": config["num_hidden_layers"],
        "num_attention_heads": config["num_attention_heads"],
        "intermediate_size": config["intermediate_size"],
        "hidden_act": activation,
        "hidden_dropout_prob": config.get("hidden_dropout_prob", 0.1),
        "attention_probs_dropout_prob": config.get("attention_probs_dropout_prob", 0.1),
        "max_position_embeddings": weights.tensors["embeddings.position_embeddings.weight"].shape[0],
        "layer_norm_eps": config.get("layer_norm_eps", 1e-12),
        "initializer_range": config.get("initializer_range", 0.02),
    }


def convert_bert(source: SourceCheckpoint) -> tuple[dict[str, Any], dict, Weights]:
    """GenolongConfig fields and state dict of the encoder of a post-LN or GENA-LM pre-LN BERT,
    and the source's weights (its head's still to take)."""
    config = source.config
    check_absolute_positions(config)
    weights = Weights(source.weights, "bert.", IGNORED)
    pre_layer_norm, final_layer_norm = layer_norm_layout(weights, config)
    fields = common_fields(config, weights) | {"backbone": "full", "pre_layer_norm": pre_layer_norm,
                                               "final_layer_norm": final_layer_norm}
    state = bert_embeddings(weights) | bert_layers(weights, fields["num_hidden_layers"], pre_layer_norm)
    if final_layer_norm:
        state |= target.final_norm_state(weights.linear(FINAL_LN))
    return fields, state, weights
