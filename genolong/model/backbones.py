"""The model side of a backbone that needs more than the plain encoder and the [CLS] vector.

A backbone is its attention (:mod:`genolong.attention`, which never names a model class); when it
changes the encoder (VCC's compressing layers, SLED's chunks) or how a classifier pools the tokens
(SLED's fusion of every chunk), the model module that defines those classes registers them under
the backbone's name::

    @register_encoder("vcc")
    class VCCEncoder(Encoder): ...        # (config) -> module: input_ids (B, L) -> (B, L, N)

    @register_pooling("sled")
    class SledFusion(nn.Module): ...      # (config) -> module: (B, L, N), mask (B, L) -> (B, 1, N)

The first lookup imports every module of :mod:`genolong.model`, so that a module placed there
registers its classes; one elsewhere (a test's toy backbone) registers when it is imported.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path

from torch import nn

from genolong.core.registry import Registry


def _model_modules() -> list[str]:
    """Every module of :mod:`genolong.model`: the built-in backbones register from theirs."""
    package = __name__.rpartition(".")[0]
    return [f"{package}.{module.name}" for module in pkgutil.iter_modules([str(Path(__file__).parent)])]


#: The encoder class of each backbone that has its own (the others run :class:`~genolong.model.encoder.Encoder`).
ENCODERS: Registry[type[nn.Module]] = Registry("backbone encoder", _model_modules)
#: The classifier pooling of each backbone that pools the tokens itself (the others read [CLS]).
POOLINGS: Registry[type[nn.Module]] = Registry("backbone pooling", _model_modules)


def register_encoder(backbone: str):
    """Class decorator: the encoder that runs the layers of ``backbone``."""

    def decorator(cls: type[nn.Module]) -> type[nn.Module]:
        ENCODERS.add(backbone, cls)
        return cls

    return decorator


def register_pooling(backbone: str):
    """Class decorator: the module that pools a ``backbone`` classifier's token vectors into one."""

    def decorator(cls: type[nn.Module]) -> type[nn.Module]:
        POOLINGS.add(backbone, cls)
        return cls

    return decorator


def backbone_encoder(backbone: str) -> type[nn.Module] | None:
    """The encoder class registered for ``backbone``; None: the plain encoder."""
    return ENCODERS.find(backbone)


def backbone_pooling(backbone: str) -> type[nn.Module] | None:
    """The pooling class registered for ``backbone``; None: the classifier reads [CLS] (or its own pooling)."""
    return POOLINGS.find(backbone)
