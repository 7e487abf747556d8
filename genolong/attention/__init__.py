"""Attention patterns, injected into the encoder by name: the registry of backbones.

A backbone is an :class:`~genolong.attention.base.Attention` subclass registered under a name with
:func:`register_attention`; the base class states the contract. The model config stores the name
(``backbone``) and the pattern's parameters, never a class. The registry imports every module of this
package before it answers, so a module placed here is a built-in backbone; one elsewhere registers when
it is imported. The block-sparse backbones (``bigbird``, ``longformer``, ``lsg``) share
:mod:`genolong.attention.pattern`, :mod:`genolong.attention.paths`, :mod:`genolong.attention.flex` and
:mod:`genolong.attention.blocksparse`; their ``attention_impl`` chooses the path (logged).
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
    """``full`` for the layers in ``config.full_attention_layers`` (ModernBERT's global layers), else
    ``config.backbone``."""
    return "full" if layer_idx in (getattr(config, "full_attention_layers", None) or ()) else config.backbone


def build_attention(config: Any, layer_idx: int = 0, name: str | None = None) -> Attention:
    """Build the attention ``name`` (default :func:`layer_backbone`) for layer ``layer_idx``, which seeds
    the random parts of a pattern."""
    cls = attention_class(name or layer_backbone(config, layer_idx))
    check_position_type(cls, config)
    cls.validate_config(config)
    attention = cls(config, layer_idx)
    attention.num_prepended = attention_class(config.backbone).num_extra_global_tokens(config)
    return attention


def attention_config(backbone: str, *, num_attention_heads: int, hidden_size: int,
                     max_position_embeddings: int, attention_probs_dropout_prob: float = 0.0,
                     position_embedding_type: str = "absolute", **params: Any) -> SimpleNamespace:
    """A stand-alone config for attention ``backbone`` (kernel tests, benchmarks): its ``config_defaults``
    overridden by ``params`` (ConfigError for one it does not have), plus the model fields it reads."""
    defaults = attention_defaults(backbone)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ConfigError(f"{', '.join(unknown)}: not parameters of attention {backbone!r}")
    return SimpleNamespace(backbone=backbone, num_attention_heads=num_attention_heads,
                           hidden_size=hidden_size, max_position_embeddings=max_position_embeddings,
                           attention_probs_dropout_prob=attention_probs_dropout_prob,
                           position_embedding_type=position_embedding_type, **{**defaults, **params})
