"""``GenolongConfig``: the one configuration of every genolong model.

transformers' standard field names, plus ``backbone`` (the attention's registry name) and that
attention's own parameters under their paper names (``block_size``, ...), merged in from the
attention class's ``config_defaults``. Impossible settings raise
:class:`~genolong.core.errors.ConfigError` at construction.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from transformers import PretrainedConfig

from genolong.attention import attention_class, attention_defaults, available_attentions, layer_backbone
from genolong.attention.base import check_position_type
from genolong.config import check_type, describe_unknown, where
from genolong.core.errors import ConfigError
from genolong.core.values import is_integer, is_number
from genolong.model.backbones import POOLINGS
from genolong.model.encoder import ACTIVATIONS
from genolong.model.heads import CLASSIFIER_POOLINGS, POOLER_ACTIVATIONS

#: A classifier's ``problem_type`` (transformers' names): one softmax over the classes, independent sigmoids, values.
SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label_classification", "multi_label_classification", "regression"
PROBLEM_TYPES = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)
#: ``position_embedding_type`` values: a learned table, rotary queries and keys, ALiBi biases.
POSITION_TYPES = ("absolute", "rotary", "alibi")
#: The positive-integer sizes of the encoder (they fix the shapes of the weights).
SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
               "max_position_embeddings")
#: The fields that say which published variant of the encoder a model is (positions, feed-forward,
#: biases, norms, per-layer plan): fixed by its weights, like the sizes.
VARIANT_FIELDS = ("position_embedding_type", "rotary_base", "local_rotary_base", "full_attention_layers",
                  "gated_feed_forward", "attention_bias", "mlp_in_bias", "mlp_out_bias", "norm_bias",
                  "first_layer_attention_norm", "head_act", "head_dense_bias", "classifier_norm")


class GenolongConfig(PretrainedConfig):
    """Configuration of a genolong encoder and its heads.

    The default sizes are the BigBird genomics model's (Zaheer et al. 2020, App. F, Table 21): 12
    layers, 12 heads, hidden 768, 32K vocabulary, 4,096 tokens, dropout 0.1, post-LN as in BERT;
    the default backbone is ``full`` (dense attention). The sizes, ``hidden_act``, the dropouts,
    ``layer_norm_eps``, ``initializer_range``, ``pad_token_id`` and ``classifier_dropout`` are BERT's.
    ``attention_bias``, ``mlp_in_bias`` / ``mlp_out_bias``, ``norm_bias`` and ``head_dense_bias``
    give biases to the attention projections, the feed-forward's up / down projections, the
    LayerNorms and the dense layer of the masked-LM head and the classifier's pooler.

    Args:
        backbone: registered attention name (``genolong.attention.available_attentions()``).
        pre_layer_norm: LayerNorm before each sub-layer (pre-LN) instead of after (post-LN).
        final_layer_norm: a LayerNorm after the last layer; None: with pre-LN only.
        embedding_layer_norm: a LayerNorm on the embeddings (BERT); False for ESM.
        position_embedding_type: ``"absolute"`` (a learned table, BERT), ``"rotary"``
            (:mod:`~genolong.model.rotary`, base ``rotary_base``) or ``"alibi"``
            (:mod:`~genolong.attention.alibi`). ``max_position_embeddings`` stays the longest input read.
        local_rotary_base: the base of the local-window layers of a per-layer plan; None: ``rotary_base``.
        full_attention_layers: layers that use full attention instead of ``backbone`` (ModernBERT:
            a local window in most layers, full attention every third); None: every layer ``backbone``.
        gated_feed_forward: a GLU feed-forward (:class:`~genolong.model.encoder.FeedForward`).
        first_layer_attention_norm: with pre-LN, whether layer 0 normalises before attention.
        head_act: the activation of the masked-LM head's transform; None: ``hidden_act``.
        classifier_norm: a LayerNorm after the classifier pooler's activation (ModernBERT's head).
        local_conv_kernel: None, or the odd width K of a residual convolution over the token
            embeddings (:class:`~genolong.model.encoder.Embeddings`).
        classifier_pooler: None: the classifier is one linear layer on [CLS]; an activation name
            (``tanh``, ``gelu``, ...): a dense layer and that activation before it.
        classifier_pooling: ``"cls"`` (the first token), ``"mean"`` or ``"max"`` over the real
            tokens (backbones with their own pooling, SLED, keep ``"cls"``).
        positive_label_weight: weight of positive labels in the multi-label loss
            (8 for the chromatin profile, BigBird App. F.3).
        tokenizer_fingerprint: :func:`genolong.dna.tokenizer.tokenizer_fingerprint` of the model's
            tokenizer, set by every genolong save and checked by :mod:`genolong.model.loading`.
        **kwargs: the backbone's parameters (its ``config_defaults``) and the usual
            ``PretrainedConfig`` arguments (``num_labels``, ``problem_type``, ``id2label``...).
    """

    model_type = "genolong"

    def __init__(
        self,
        backbone: str = "full",
        vocab_size: int = 32000,
        hidden_size: int = 768,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        intermediate_size: int = 3072,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 4096,
        layer_norm_eps: float = 1e-12,
        initializer_range: float = 0.02,
        pre_layer_norm: bool = False,
        final_layer_norm: bool | None = None,
        embedding_layer_norm: bool = True,
        local_conv_kernel: int | None = None,
        position_embedding_type: str = "absolute",
        rotary_base: float = 10000.0,
        local_rotary_base: float | None = None,
        full_attention_layers: list[int] | None = None,
        gated_feed_forward: bool = False,
        attention_bias: bool = True,
        mlp_in_bias: bool = True,
        mlp_out_bias: bool = True,
        norm_bias: bool = True,
        first_layer_attention_norm: bool = True,
        head_act: str | None = None,
        head_dense_bias: bool = True,
        classifier_norm: bool = False,
        pad_token_id: int = 0,
        classifier_dropout: float | None = None,
        classifier_pooler: str | None = None,
        classifier_pooling: str = "cls",
        positive_label_weight: float = 1.0,
        tie_word_embeddings: bool = True,
        tokenizer_fingerprint: str | None = None,
        **kwargs: Any,
    ):
        arguments = dict(locals())  # every named argument becomes the attribute of that name
        backbone_params = {
            name: kwargs.pop(name, default) for name, default in attention_defaults(backbone).items()
        }
        _reject_other_backbones_params(backbone, kwargs)
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
        for name in ("self", "kwargs", "__class__", "pad_token_id", "tie_word_embeddings"):
            arguments.pop(name, None)
        if full_attention_layers is not None:
            arguments["full_attention_layers"] = list(full_attention_layers)
        for name, value in (arguments | backbone_params).items():
            setattr(self, name, value)
        self.validate_genolong()

    def validate_genolong(self) -> None:
        """Raise ConfigError on an impossible setting (called at construction)."""
        for name in SIZE_FIELDS:
            if not _positive_int(getattr(self, name)):
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                              f"{self.num_attention_heads}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {value!r}")
        kernel = self.local_conv_kernel
        if kernel is not None and (not _positive_int(kernel) or kernel % 2 == 0):
            raise ConfigError(f"local_conv_kernel must be null or a positive odd integer, got {kernel!r}")
        _check_choice("hidden_act", self.hidden_act, ACTIVATIONS)
        if self.head_act is not None:
            _check_choice("head_act", self.head_act, ACTIVATIONS)
        self.validate_positions()
        if self.classifier_pooler is not None and self.classifier_pooler not in POOLER_ACTIVATIONS:
            raise ConfigError(f"unknown classifier_pooler {self.classifier_pooler!r}; choose null or one of: "
                              f"{', '.join(POOLER_ACTIVATIONS)}")
        _check_choice("classifier_pooling", self.classifier_pooling, CLASSIFIER_POOLINGS)
        if self.classifier_pooling != "cls" and POOLINGS.find(self.backbone) is not None:
            raise ConfigError(f"backbone {self.backbone!r} pools the tokens itself; leave classifier_pooling "
                              "at 'cls'")
        if self.pad_token_id is None or not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id={self.pad_token_id!r} is not a token id below "
                              f"vocab_size={self.vocab_size}")
        if self.problem_type is not None:
            _check_choice("problem_type", self.problem_type, PROBLEM_TYPES)
        if self.tokenizer_fingerprint is not None and not isinstance(self.tokenizer_fingerprint, str):
            raise ConfigError(f"tokenizer_fingerprint must be a string, got {self.tokenizer_fingerprint!r}")
        if self.positive_label_weight <= 0:
            raise ConfigError(f"positive_label_weight must be positive, got {self.positive_label_weight!r}")
        attention = attention_class(self.backbone)
        for layer_backbone_name in {layer_backbone(self, i) for i in range(self.num_hidden_layers)}:
            check_position_type(attention_class(layer_backbone_name), self)
        attention.validate_config(self)
        multiple = attention.length_multiple(self)
        if self.max_position_embeddings % multiple:
            raise ConfigError(f"max_position_embeddings={self.max_position_embeddings} is not a multiple of "
                              f"{multiple}, the length unit of backbone {self.backbone!r}")

    def validate_positions(self) -> None:
        """Raise ConfigError on an unknown position type, an odd rotary head size, a base that is
        not positive, or a per-layer plan that names layers the model does not have."""
        _check_choice("position_embedding_type", self.position_embedding_type, POSITION_TYPES)
        if self.position_embedding_type == "rotary" and (self.hidden_size // self.num_attention_heads) % 2:
            raise ConfigError(f"rotary positions need an even head size, got {self.hidden_size // self.num_attention_heads}")
        for name in ("rotary_base", "local_rotary_base"):
            value = getattr(self, name)
            if value is not None and (not is_number(value) or value <= 0):
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        layers = self.full_attention_layers
        if layers is not None and (
            not isinstance(layers, list)
            or any(not is_integer(i, 0, self.num_hidden_layers - 1) for i in layers)
            or len(set(layers)) != len(layers)
        ):
            raise ConfigError(f"full_attention_layers must list distinct layer indices in [0, {self.num_hidden_layers}), "
                              f"got {layers!r}")


def _positive_int(value: Any) -> bool:
    return is_integer(value, 1)


def _check_choice(name: str, value: Any, choices) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; choose one of: {', '.join(choices)}")


def check_input_length(max_len: int, config: GenolongConfig) -> None:
    """Refuse inputs of ``max_len`` tokens that a model with ``config`` cannot read (ConfigError,
    one line with the way out): longer than its positions, unless its backbone (SLED) reads any length."""
    longest = attention_class(config.backbone).max_input_length(config)
    if longest is not None and max_len > longest:
        raise ConfigError(
            f"max_len={max_len} exceeds the model's max_position_embeddings={longest}",
            hint=f"make the model long with `genolong convert MODEL --out LONG --backbone lsg --max-length {max_len}`, "
            f"or read chunks of at most {longest} tokens with --backbone sled",
        )


def _reject_other_backbones_params(backbone: str, kwargs: dict[str, Any]) -> None:
    """A parameter of another backbone is a mistake (it would be silently ignored)."""
    for other in available_attentions():
        misplaced = sorted(set(attention_defaults(other)) & set(kwargs))
        if misplaced and other != backbone:
            raise ConfigError(
                f"{', '.join(misplaced)} {'is a parameter' if len(misplaced) == 1 else 'are parameters'} "
                f"of backbone {other!r}, not of {backbone!r}"
            )


def check_model_fields(fields: dict[str, Any], source: str = "", prefix: str = "model.") -> None:
    """Check a config file's ``model:`` section without building the model: every key is a
    ``GenolongConfig`` argument or a parameter of the chosen backbone, every value has that
    argument's type (a backbone parameter: its default's type). Raises ConfigError naming
    ``source`` and the key."""
    backbone = fields.get("backbone", "full")
    if backbone not in available_attentions():
        raise ConfigError(f"{where(source)}{prefix}backbone: unknown backbone {backbone!r}; choose one of: "
                          f"{', '.join(available_attentions())}")
    own = attention_defaults(backbone)
    try:
        _reject_other_backbones_params(backbone, {k: v for k, v in fields.items() if k not in own})
    except ConfigError as err:
        raise ConfigError(f"{where(source)}{prefix.rstrip('.')}: {err.message}") from None
    hints = typing.get_type_hints(GenolongConfig.__init__)
    known = {name: hints[name] for name in inspect.signature(GenolongConfig.__init__).parameters
             if name not in ("self", "kwargs")}
    known |= {name: Any if default is None else type(default) for name, default in own.items()}
    unknown = sorted(set(fields) - set(known), key=str)
    if unknown:
        raise ConfigError(f"{where(source)}unknown key {describe_unknown(unknown, list(known), prefix)}")
    for name, value in fields.items():
        check_type(value, known[name], source, f"{prefix}{name}")
