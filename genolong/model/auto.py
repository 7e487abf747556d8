"""Register genolong with transformers' Auto classes as soon as transformers loads them.

``import genolong`` must stay fast: the CLI imports it, and importing torch plus
transformers' modeling code takes seconds. So :func:`install` registers nothing itself when
transformers' Auto modules are not imported yet; a meta-path hook registers
:class:`~genolong.model.configuration.GenolongConfig` with ``AutoConfig`` right after
``transformers.models.auto.configuration_auto`` is first imported, and the models with
``AutoModel``, ``AutoModelForMaskedLM`` and ``AutoModelForSequenceClassification`` right
after ``transformers.models.auto.modeling_auto``. When they are already imported, the
registration happens at once. Either way, after ``import genolong``::

    AutoConfig.for_model("genolong", backbone="bigbird", ...)
    AutoModelForMaskedLM.from_pretrained(directory)
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from types import ModuleType

CONFIG_AUTO = "transformers.models.auto.configuration_auto"
MODELING_AUTO = "transformers.models.auto.modeling_auto"


def register_config(configuration_auto: ModuleType) -> None:
    """Register GenolongConfig under model_type "genolong"."""
    from genolong.model.configuration import GenolongConfig

    configuration_auto.AutoConfig.register("genolong", GenolongConfig, exist_ok=True)


def register_models(modeling_auto: ModuleType) -> None:
    """Register the model classes with their Auto classes."""
    from genolong.model import hf

    for auto_class, model_class in (
        (modeling_auto.AutoModel, hf.GenolongModel),
        (modeling_auto.AutoModelForMaskedLM, hf.GenolongForMaskedLM),
        (modeling_auto.AutoModelForSequenceClassification, hf.GenolongForSequenceClassification),
    ):
        auto_class.register(hf.GenolongConfig, model_class, exist_ok=True)


REGISTRATIONS: dict[str, Callable[[ModuleType], None]] = {
    CONFIG_AUTO: register_config,
    MODELING_AUTO: register_models,
}


class RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Meta-path finder that runs a registration right after a watched module executes.

    It finds nothing itself: it asks the other finders for the module's spec and wraps the
    loader's ``exec_module`` so that the registration follows it.
    """

    def find_spec(self, fullname, path, target=None):
        register = REGISTRATIONS.get(fullname)
        if register is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def exec_then_register(module: ModuleType) -> None:
            exec_module(module)
            register(module)

        spec.loader.exec_module = exec_then_register
        return spec


def install() -> None:
    """Register now for the Auto modules already imported; hook the import of the others."""
    pending = False
    for name, register in REGISTRATIONS.items():
        if name in sys.modules:
            register(sys.modules[name])
        else:
            pending = True
    if pending and not any(isinstance(finder, RegisterAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, RegisterAfterImport())
