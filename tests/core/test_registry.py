"""genolong.core.registry: names to entries, built-in entries imported on the first lookup."""

from __future__ import annotations

import sys

import pytest

from genolong.core.errors import ConfigError
from genolong.core.registry import Registry


class Entry:
    pass


def test_builtins_are_imported_once_on_the_first_lookup(tmp_path, monkeypatch):
    (tmp_path / "builtin_entries.py").write_text(
        "from test_registry_target import REGISTRY\nREGISTRY.add('builtin', 'from the module')\n")
    registry = Registry("thing", lambda: ["builtin_entries"])
    target = type(sys)("test_registry_target")
    target.REGISTRY = registry
    monkeypatch.setitem(sys.modules, "test_registry_target", target)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "builtin_entries", raising=False)
    registry.add("mine", "added by hand")
    assert registry.entries == {"mine": "added by hand"}  # nothing imported yet
    assert registry.names() == ["builtin", "mine"]
    assert registry.get("builtin") == "from the module"


def test_a_name_holds_one_entry_unless_it_is_the_same_one():
    registry: Registry[type] = Registry("thing", list)
    registry.add("a", Entry)
    registry.add("a", Entry)  # a module imported again registers again
    with pytest.raises(ValueError, match="thing 'a' is already registered to Entry"):
        registry.add("a", type("Other", (), {}))


def test_identity_decides_what_counts_as_the_same_entry():
    registry: Registry[Entry] = Registry("task", list, identity=type)
    registry.add("a", Entry())
    registry.add("a", Entry())  # another instance of the same class
    with pytest.raises(ValueError, match="task 'a' is already registered to Entry"):
        registry.add("a", type("Other", (), {})())


def test_an_unknown_name_names_the_choices():
    registry = Registry("attention", list)
    registry.add("full", 1)
    registry.add("bigbird", 2)
    with pytest.raises(ConfigError, match="unknown attention 'lsh'; choose one of: bigbird, full"):
        registry.get("lsh")
