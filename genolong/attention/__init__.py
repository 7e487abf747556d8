"""Attention patterns, injected into the encoder by name: the registry of backbones.

Every backbone is an :class:`~genolong.attention.base.Attention` subclass registered under a
string name with :func:`register_attention`; the base class states the contract (what the
attention is and what it needs from the encoder) with its defaults. The model config stores only
the name (its ``backbone`` field) and the pattern's own parameters, never a class, and everything
else (the encoder, the model classes, ``genolong compare``) asks the registry.

Adding a backbone is one module that registers a class, plus an encoder subclass in
:mod:`genolong.model` when the backbone changes more than the attention (VCC, SLED). The registry
imports every module of this package before it answers, so a module placed here is a built-in
backbone; one elsewhere registers when it is imported.

Block-sparse attentions (``bigbird``, ``longformer``, ``lsg``) share
:mod:`genolong.attention.pattern` (the pattern as data), :mod:`genolong.attention.paths` (the
dense reference and the gathered-blocks path), :mod:`genolong.attention.flex` (the
``flex_attention`` path) and :mod:`genolong.attention.blocksparse` (their common forward). Their
config field ``attention_impl`` (``auto`` | ``flex`` | ``gather`` | ``dense``) chooses the path;
the choice is logged on logger ``genolong.attention``.
"""

from __future__ import annotations

import pkgutil
from types import SimpleNamespace
from typing import Any

from genolong.attention.base import Attention, check_position_type
from genolong.core.errors import ConfigError
from genolong.core.registry import Registry


def _builtin_backbones() -> list[str]:
    """Every module of this package: the built-in backbones register from theirs."""
    return [f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__)]


#: The backbones by name.
ATTENTIONS: Registry[type[Attention]] = Registry("attention", _builtin_backbones)


def register_attention(name: str):
    """Class decorator: register an :class:`Attention` subclass as backbone ``name``."""

    def decorator(cls: type[Attention]) -> type[Attention]:
        if not issubclass(cls, Attention):
            raise TypeError(f"attention {name!r}: {cls.__name__} is not a genolong.attention.Attention")
        ATTENTIONS.add(name, cls)
        cls.attention_name = name
        return cls

    return decorator


def attention_class(name: str) -> type[Attention]:
    """The class registered under ``name``; raises ConfigError for an unknown name."""
    return ATTENTIONS.get(name)


def available_attentions() -> list[str]:
    """Names of all registered backbones, sorted."""
    return ATTENTIONS.names()


def attention_defaults(name: str) -> dict[str, Any]:
    """The parameters (with defaults) of attention ``name``."""
    return dict(attention_class(name).config_defaults)


def layer_backbone(config: Any, layer_idx: int) -> str:
    """The attention of layer ``layer_idx``: ``full`` for the layers listed in
    ``config.full_attention_layers`` (ModernBERT's global layers between local-window ones), else
    ``config.backbone``."""
    return "full" if layer_idx in (getattr(config, "full_attention_layers", None) or ()) else config.backbone


def build_attention(config: Any, layer_idx: int = 0, name: str | None = None) -> Attention:
    """Build the attention named ``name`` (default :func:`layer_backbone`) for layer ``layer_idx``.

    ``layer_idx`` lets patterns with random parts draw a different, seeded layout per layer.
    """
    cls = attention_class(name or layer_backbone(config, layer_idx))
    check_position_type(cls, config)
    cls.validate_config(config)
    attention = cls(config, layer_idx)
    attention.num_prepended = attention_class(config.backbone).num_extra_global_tokens(config)
    return attention


def attention_config(
    backbone: str,
    *,
    num_attention_heads: int,
    hidden_size: int,
    max_position_embeddings: int,
    attention_probs_dropout_prob: float = 0.0,
    position_embedding_type: str = "absolute",
    **params: Any,
) -> SimpleNamespace:
    """A stand-alone config for attention ``backbone`` without a model (kernel tests, benchmarks).

    It holds the backbone's ``config_defaults``, overridden by ``params``, plus the model fields an
    attention reads. A parameter the backbone does not have raises ConfigError.
    """
    defaults = attention_defaults(backbone)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ConfigError(f"{', '.join(unknown)}: not parameters of attention {backbone!r}")
    return SimpleNamespace(
        backbone=backbone,
        num_attention_heads=num_attention_heads,
        hidden_size=hidden_size,
        max_position_embeddings=max_position_embeddings,
        attention_probs_dropout_prob=attention_probs_dropout_prob,
        position_embedding_type=position_embedding_type,
        **{**defaults, **params},
    )
