"""A name -> entry table whose built-in entries register when the first lookup imports their modules
(:data:`genolong.attention.ATTENTIONS`, :data:`genolong.tasks.task.TASKS`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from genolong.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries of one ``kind`` (in messages: "attention", "task") by name; ``builtin_modules`` returns the
    modules to import before the first lookup, ``identity`` what two registrations under one name must
    share to be the same entry (a module imported again registers again; default: the entry itself)."""

    def __init__(self, kind: str, builtin_modules: Callable[[], Iterable[str]],
                 identity: Callable[[T], Any] = lambda entry: entry):
        self.kind = kind
        self.entries: dict[str, T] = {}
        self._builtin_modules = builtin_modules
        self._identity = identity
        self._loaded = False

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` as ``name``; a ValueError if ``name`` holds another entry."""
        existing = self.entries.get(name)
        if existing is not None and self._identity(existing) is not self._identity(entry):
            raise ValueError(f"{self.kind} {name!r} is already registered to {_describe(existing)}")
        self.entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        """The entry registered as ``name``; a ConfigError naming the choices for an unknown name."""
        self._load_builtins()
        if name not in self.entries:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(sorted(self.entries))}")
        return self.entries[name]

    def find(self, name: str) -> T | None:
        """The entry registered as ``name``, or None."""
        self._load_builtins()
        return self.entries.get(name)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._load_builtins()
        return sorted(self.entries)

    def _load_builtins(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtin_modules():
                importlib.import_module(module)


def _describe(entry: Any) -> str:
    return getattr(entry, "__name__", type(entry).__name__)
