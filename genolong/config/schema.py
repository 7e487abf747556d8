"""YAML configs validated into dataclasses, whose ``__post_init__`` raises
:class:`~genolong.core.errors.ConfigError` on nonsense.

:func:`from_dict` rejects unknown keys (suggesting the closest known one), checks every value
against the field's type (an integer field refuses 64.7, a float field NaN, a section a scalar),
takes a single string where a list of strings goes (``valid_chromosomes: chr17``), and prefixes
every error with the file and the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from genolong.core.errors import ConfigError, UserError
from genolong.core.values import is_integer, is_number

T = TypeVar("T")

#: A number in scientific notation without a decimal point (``1e-4``), which YAML 1.1 reads as text.
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def from_dict(cls: type[T], data: Any, *, source: str = "config", prefix: str = "") -> T:
    """Build dataclass ``cls`` from mapping ``data`` read from ``source`` (a file name); ``prefix``
    is the dotted key of a nested section. Raises ConfigError naming ``source`` and the key."""
    data = require_mapping(data, source, prefix)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = sorted(set(data) - set(names), key=str)
    if unknown:
        raise ConfigError(f"{where(source)}unknown key {describe_unknown(unknown, names, prefix)}")
    values = {name: check_type(value, hints[name], source, f"{prefix}{name}") for name, value in data.items()}
    try:
        return cls(**values)
    except ConfigError as err:
        section = f"{prefix.rstrip('.')}: " if prefix else ""
        raise ConfigError(f"{where(source)}{section}{err.message}", hint=err.hint) from None


def require_mapping(data: Any, source: str, prefix: str) -> dict:
    """``data`` (None: empty), or a ConfigError when it is not a mapping."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where(source)}{prefix.rstrip('.') or 'the config'} must be a mapping (key: value lines), "
                          f"got {type(data).__name__} {data!r}")
    return data


def describe_unknown(unknown: list, known: list[str], prefix: str = "") -> str:
    """``model.num_hiden_layers (did you mean num_hidden_layers?); known: ...``."""
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), known, n=1)
        parts.append(f"{prefix}{key}" + (f" (did you mean {close[0]}?)" if close else ""))
    return f"{', '.join(parts)}; known: {', '.join(sorted(known))}"


def check_type(value: Any, hint: Any, source: str, key: str) -> Any:
    """``value`` checked against type ``hint`` (and converted: a list to a tuple, a string to a
    one-item list of strings); a nested dataclass is built with :func:`from_dict`."""
    if dataclasses.is_dataclass(hint):
        if hasattr(hint, "from_mapping"):  # a section whose keys are not its fields (``model:``)
            return hint.from_mapping(require_mapping(value, source, f"{key}."), source=source, prefix=f"{key}.")
        return from_dict(hint, value, source=source, prefix=f"{key}.")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return check_type(value, option, source, key)
            except ConfigError:
                continue
        raise _type_error(source, key, " or ".join(_type_name(a) for a in args), value)
    if hint is Any:
        return value
    if origin in (list, tuple):
        if isinstance(value, str) and args == (str,):
            return [value]
        if not isinstance(value, list | tuple) or (
                origin is tuple and len(args) != len(value) and Ellipsis not in args):
            raise _type_error(source, key, _type_name(hint), value)
        items = args[:1] * len(value) if origin is list or Ellipsis in args else args
        checked = [check_type(v, a, source, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, items, strict=True))]
        return tuple(checked) if origin is tuple else checked
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(source, key, "a mapping (key: value lines)", value)
        return {k: check_type(v, args[1], source, f"{key}.{k}") for k, v in value.items()}
    if hint not in _SCALARS:
        raise TypeError(f"no type check for {hint!r}")  # a field type this module does not know: a bug
    name, check = _SCALARS[hint]
    if not check(value):
        raise _type_error(source, key, name, value)
    return value


#: Scalar field types: their name in error messages and their check.
_SCALARS: dict[Any, tuple[str, Callable[[Any], bool]]] = {
    int: ("an integer", is_integer),
    float: ("a finite number", is_number),
    bool: ("true or false", lambda v: isinstance(v, bool)),
    str: ("a string", lambda v: isinstance(v, str)),
    type(None): ("null", lambda v: v is None),
}


def _type_name(hint: Any) -> str:
    if hint in _SCALARS:
        return _SCALARS[hint][0]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return f"a list of {_type_name(args[0]).removeprefix('an ').removeprefix('a ')}s"
    if origin is tuple:
        return f"a list of {len(args)} values ({', '.join(_type_name(a) for a in args)})"
    if dataclasses.is_dataclass(hint):
        return f"a {hint.__name__} mapping"
    return str(hint)


def _type_error(source: str, key: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{where(source)}{key} must be {expected}, got {value!r}")


def where(source: str) -> str:
    """``"file.yaml: "``, the start of an error message about ``source``; empty without one."""
    return f"{source}: " if source else ""


def parse_assignment(text: str) -> tuple[str, Any]:
    """``"train.max_steps=100"`` -> ``("train.max_steps", 100)``: the value is read as YAML
    (``1e-4`` as a number); the key is checked later, by the config. ConfigError without ``=``, with
    an empty key or a value that is not valid YAML."""
    key, equals, text_value = text.partition("=")
    key = key.strip()
    if not equals or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"expected section.key=value, got {text!r}")
    if _EXPONENT_NUMBER.fullmatch(text_value.strip()):
        return key, float(text_value)
    try:
        return key, yaml.safe_load(text_value)
    except yaml.YAMLError as err:
        raise ConfigError(f"{key}: the value {text_value!r} is not valid YAML ({' '.join(str(err).split())})") from None


def to_dict(config: Any) -> Any:
    """Plain-data form of a dataclass config (tuples become lists, for YAML); a section with
    ``from_mapping`` gives its ``to_mapping()``."""
    if hasattr(config, "to_mapping"):
        return to_dict(config.to_mapping())
    if dataclasses.is_dataclass(config):
        return {f.name: to_dict(getattr(config, f.name)) for f in dataclasses.fields(config)}
    if isinstance(config, tuple | list):
        return [to_dict(value) for value in config]
    if isinstance(config, dict):
        return {key: to_dict(value) for key, value in config.items()}
    return config


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping in YAML file ``path``; an unreadable, invalid, empty or non-mapping file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read the config: {err}") from None
    except yaml.YAMLError as err:
        raise UserError(f"{path}: invalid YAML: {' '.join(str(err).split())}") from None
    if data is None:
        raise ConfigError(f"{path}: the config is empty", hint="give at least one setting, or leave out the file")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a mapping (key: value lines), got {type(data).__name__}")
    return data


def read_with_extends(path: str | Path, merge: Callable[[dict, dict], dict], _chain: tuple[Path, ...] = ()) -> dict:
    """:func:`read_yaml`, then, when the file says ``extends: PARENT`` (a file beside it),
    ``merge(parent's data, this file's data)``; a cycle is a ConfigError."""
    path = Path(path)
    chain = (*_chain, path.resolve())
    data = read_yaml(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ConfigError(f"{path}: extends must be a config name or file, got {parent!r}")
    parent_path = path.parent / parent
    if not parent_path.is_file():
        raise UserError(f"{path}: extends {parent!r}, but there is no config file {parent_path}",
                        hint="extends names a YAML file, relative to the file that extends it")
    if parent_path.resolve() in chain:
        cycle = " -> ".join(str(p) for p in (*chain, parent_path.resolve()))
        raise ConfigError(f"{path}: extends makes a cycle: {cycle}")
    return merge(read_with_extends(parent_path, merge, chain), data)


def load_yaml(path: str | Path, cls: type[T]) -> T:
    """Read a YAML file into dataclass ``cls`` (validated)."""
    return from_dict(cls, read_yaml(path), source=str(path))


def dump_yaml(config: Any) -> str:
    """YAML text of a dataclass config; ``load_yaml`` of it gives an equal config."""
    return yaml.safe_dump(to_dict(config), sort_keys=False)
