"""YAML configs validated into dataclasses.

Every config is a dataclass whose ``__post_init__`` raises
:class:`~genolong.errors.ConfigError` on nonsense. :func:`from_dict` builds one from
plain data (nested dataclasses included) and rejects unknown keys with the list of
known ones, so a typo in a YAML file is an error, not a silently ignored setting.
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from genolong.errors import ConfigError, UserError

T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any] | None, *, source: str = "config") -> T:
    """Build dataclass ``cls`` from ``data``; unknown keys raise ConfigError."""
    data = dict(data or {})
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping for {cls.__name__}, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)} for {cls.__name__}; "
                          f"known: {', '.join(sorted(names))}")
    for name, value in data.items():
        if dataclasses.is_dataclass(hints.get(name)) and isinstance(value, dict):
            data[name] = from_dict(hints[name], value, source=f"{source}.{name}")
    try:
        return cls(**data)
    except TypeError as err:
        raise ConfigError(f"{source}: {err}") from None


def to_dict(config: Any) -> dict[str, Any]:
    """Plain-data form of a dataclass config (tuples become lists, for YAML)."""

    def plain(value):
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(config))


def load_yaml(path: str | Path, cls: type[T]) -> T:
    """Read a YAML file into dataclass ``cls`` (validated)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise UserError(f"{path}: invalid YAML: {str(err).splitlines()[0]}") from None
    return from_dict(cls, data, source=str(path))


def dump_yaml(config: Any) -> str:
    """YAML text of a dataclass config; ``load_yaml`` of it gives an equal config."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)
