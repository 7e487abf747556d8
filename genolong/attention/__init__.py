"""Attention patterns, injected into the encoder by name.

Every attention is an ``nn.Module`` registered under a string name with
:func:`register_attention`. The model config stores only that name (its ``backbone`` field)
and the pattern's own parameters, never a class.

Contract between an attention and the encoder
---------------------------------------------

Construction and call (all tensors on one device and in one dtype)::

    attn = build_attention(config, layer_idx)   # validates, then cls(config, layer_idx)
    out = attn(q, k, v, padding_mask)           # q, k, v: (B, H, L, D)
                                                # padding_mask: (B, L) bool, True = real token,
                                                #   or None (no padding)
                                                # out: (B, H, L, D)

``config`` is a :class:`~genolong.model.modeling.GenolongConfig`, or any object with the fields of
``cls.config_defaults`` plus ``num_attention_heads``, ``hidden_size``,
``max_position_embeddings`` and ``attention_probs_dropout_prob``. ``layer_idx`` seeds
per-layer randomness (BigBird's random blocks, LSG's LSH projections) as
``attention_seed + layer_idx``.

Each class declares:

* ``config_defaults: dict[str, Any]``: its parameters under the papers' names, with their
  defaults. ``GenolongConfig`` merges the chosen backbone's dict into itself.
* ``validate_config(config)`` (classmethod): raises :class:`~genolong.errors.ConfigError` for
  an impossible setting. Examples: a block size that does not divide
  ``max_position_embeddings``, a window longer than the sequence, an unknown LSG sparsity
  type. It never falls back to full attention.
* ``num_extra_global_tokens(config) -> int`` (classmethod): how many learned global tokens
  the encoder must *prepend* to the token sequence. This is BigBird-ETC's, Longformer's and
  LSG's global tokens; 0 for ``full`` and BigBird-ITC.
* ``length_multiple(config) -> int`` (classmethod): the encoder pads the token sequence (the
  part after the prepended global tokens) to a multiple of this, and marks the padding False
  in ``padding_mask``; 1 for ``full``.

Global tokens always come first in the sequence the attention sees. A sparse attention
treats its first ``G`` tokens as global: the prepended ones, or for BigBird-ITC the first
``num_global_blocks`` blocks of the sequence itself. The first token must be real (padding
goes at the end), so that every query sees at least one real key. Padded positions receive
outputs too; they never affect real tokens.

Block-sparse attentions (``bigbird``, ``longformer``, ``lsg``) share
:mod:`genolong.attention.pattern` (the pattern as data), :mod:`genolong.attention.paths` (the
dense reference and the gathered-blocks and ``flex_attention`` execution paths) and
:mod:`genolong.attention.blocksparse` (their common forward). Their config field
``attention_impl`` (``auto`` | ``flex`` | ``gather`` | ``dense``) chooses the path; the choice is
logged on logger ``genolong.attention``.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from torch import nn

from genolong.errors import ConfigError

_REGISTRY: dict[str, type[nn.Module]] = {}

#: Modules that register the built-in attentions when imported.
_BUILTIN_MODULES = ("full", "bigbird", "longformer", "lsg", "vcc", "sled")


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


def attention_config(
    backbone: str,
    *,
    num_attention_heads: int,
    hidden_size: int,
    max_position_embeddings: int,
    attention_probs_dropout_prob: float = 0.0,
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
        **{**defaults, **params},
    )
