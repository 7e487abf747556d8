"""Register genolong with transformers' Auto classes as soon as transformers can take it.

``import genolong`` must stay fast: the CLI imports it, and importing torch plus
transformers' modeling code takes seconds. So :func:`install` registers at once only what
transformers has already loaded; for the rest a meta-path hook registers right after
transformers' Auto module is imported, and, where that happens while a module the
registration needs is still half-executed (transformers 4.x imports ``modeling_auto`` from
inside ``modeling_utils``), as soon as that module has finished:

* :class:`~genolong.model.configuration.GenolongConfig` with ``AutoConfig``;
* the models with ``AutoModel``, ``AutoModelForMaskedLM`` and
  ``AutoModelForSequenceClassification``.

Either way, after ``import genolong``::

    AutoConfig.for_model("genolong", backbone="bigbird", ...)
    AutoModelForMaskedLM.from_pretrained(directory)
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable
from typing import NamedTuple


def register_config() -> None:
    """Register GenolongConfig under model_type "genolong"."""
    from transformers.models.auto.configuration_auto import AutoConfig

    from genolong.model.configuration import GenolongConfig

    AutoConfig.register("genolong", GenolongConfig, exist_ok=True)


def register_models() -> None:
    """Register the model classes with their Auto classes."""
    from transformers.models.auto import modeling_auto

    from genolong.model import modeling as hf

    for auto_class, model_class in (
        (modeling_auto.AutoModel, hf.GenolongModel),
        (modeling_auto.AutoModelForMaskedLM, hf.GenolongForMaskedLM),
        (modeling_auto.AutoModelForSequenceClassification, hf.GenolongForSequenceClassification),
    ):
        auto_class.register(hf.GenolongConfig, model_class, exist_ok=True)


class Registration(NamedTuple):
    """Run ``register`` once ``trigger`` has executed and none of ``needs`` is half-executed."""

    trigger: str
    needs: tuple[str, ...]
    register: Callable[[], None]


REGISTRATIONS = (
    Registration(
        "transformers.models.auto.configuration_auto", ("transformers.configuration_utils",), register_config
    ),
    Registration("transformers.models.auto.modeling_auto", ("transformers.modeling_utils",), register_models),
)


class RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Runs each registration as soon as its trigger module has finished executing and none of the
    modules it needs is still executing (those it then imports itself, when not imported yet).

    The finder finds nothing itself: for a watched module it asks the other finders for the
    spec and wraps the loader's ``exec_module`` so that it records the module as finished.
    Modules already imported when the finder is made count as finished.
    """

    def __init__(self, registrations: tuple[Registration, ...]):
        self.pending = list(registrations)
        self.watched = {name for r in registrations for name in (r.trigger, *r.needs)}
        self.finished = {name for name in self.watched if name in sys.modules}
        self.run_ready()

    def ready(self, registration: Registration) -> bool:
        return registration.trigger in self.finished and all(
            name in self.finished or name not in sys.modules for name in registration.needs
        )

    def run_ready(self) -> None:
        for registration in [r for r in self.pending if self.ready(r)]:
            self.pending.remove(registration)
            registration.register()

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.watched or fullname in self.finished:
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

        def exec_then_register(module) -> None:
            exec_module(module)
            self.finished.add(fullname)
            self.run_ready()

        spec.loader.exec_module = exec_then_register
        return spec


def install() -> None:
    """Register what transformers has loaded; hook the imports that the rest waits for."""
    if any(isinstance(finder, RegisterAfterImport) for finder in sys.meta_path):
        return
    finder = RegisterAfterImport(REGISTRATIONS)
    if finder.pending:
        sys.meta_path.insert(0, finder)
