"""Attention patterns, injected into the encoder by name.

Every attention is an ``nn.Module`` registered under a string name with
:func:`register_attention`. The model config stores only that name (its
``backbone`` field) and the pattern's own parameters, never a class.

The one call signature (all tensors on one device, one dtype)::

    attn = build_attention(config, layer_idx)      # config: GenolongConfig (or any object
                                                   # with the fields in cls.config_defaults)
    out = attn(q, k, v, padding_mask)              # q, k, v: (B, H, L, D); padding_mask: (B, L) bool,
                                                   # True = real token (or None); out: (B, H, L, D)

Each class declares:

* ``config_defaults: dict[str, Any]`` -- its parameters with their paper names and
  defaults; :class:`~genolong.model.hf.GenolongConfig` merges them in.
* ``validate_config(config)`` (classmethod) -- raises
  :class:`~genolong.errors.ConfigError` on an impossible setting.
"""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

from genolong.errors import ConfigError

_REGISTRY: dict[str, type[nn.Module]] = {}

#: Modules that register the built-in attentions when imported.
_BUILTIN_MODULES = ("full",)


def register_attention(name: str):
    """Class decorator: register an attention module under ``name``."""

    def decorator(cls: type[nn.Module]) -> type[nn.Module]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"attention {name!r} is already registered to {_REGISTRY[name].__name__}")
        cls.attention_name = name
        _REGISTRY[name] = cls
        return cls

    return decorator


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(f"{__name__}.{module}")


def attention_class(name: str) -> type[nn.Module]:
    """The class registered under ``name``; raises ConfigError for an unknown name."""
    _load_builtins()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown attention {name!r}; choose one of: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def available_attentions() -> list[str]:
    """Names of all registered attentions."""
    _load_builtins()
    return sorted(_REGISTRY)


def attention_defaults(name: str) -> dict[str, Any]:
    """The parameters (with defaults) of attention ``name``."""
    return dict(getattr(attention_class(name), "config_defaults", {}))


def build_attention(config: Any, layer_idx: int = 0, name: str | None = None) -> nn.Module:
    """Build the attention named ``name`` (default ``config.backbone``) for layer ``layer_idx``.

    ``layer_idx`` lets patterns with random parts draw a different, seeded layout per layer.
    """
    cls = attention_class(name or config.backbone)
    cls.validate_config(config)
    return cls(config, layer_idx)
