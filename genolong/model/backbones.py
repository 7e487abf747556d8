"""The model side of a backbone that needs more than the plain encoder and the [CLS] vector: its
attention (:mod:`genolong.attention`) names no model class, so a model module registers the
backbone's encoder (VCC, SLED) or classifier pooling (SLED's fusion) under the backbone's name::

    @register_encoder("vcc")
    class VCCEncoder(Encoder): ...        # (config) -> module: input_ids (B, L) -> (B, L, N)

    @register_pooling("sled")
    class SledFusion(nn.Module): ...      # (config) -> module: (B, L, N), mask (B, L) -> (B, 1, N)

The first lookup imports every module of :mod:`genolong.model`; one elsewhere (a test's toy
backbone) registers when it is imported.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path

from torch import nn

from genolong.core.registry import Registry


def _model_modules() -> list[str]:
    package = __name__.rpartition(".")[0]
    return [f"{package}.{module.name}" for module in pkgutil.iter_modules([str(Path(__file__).parent)])]


#: The encoder class of each backbone that has its own (the others run :class:`~genolong.model.encoder.Encoder`).
ENCODERS: Registry[type[nn.Module]] = Registry("backbone encoder", _model_modules)
#: The classifier pooling of each backbone that pools the tokens itself (the others read [CLS]).
POOLINGS: Registry[type[nn.Module]] = Registry("backbone pooling", _model_modules)


def register_encoder(backbone: str):
    """Class decorator: the encoder that runs the layers of ``backbone``."""
    return lambda cls: ENCODERS.add(backbone, cls)


def register_pooling(backbone: str):
    """Class decorator: the module that pools a ``backbone`` classifier's token vectors into one."""
    return lambda cls: POOLINGS.add(backbone, cls)
