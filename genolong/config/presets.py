"""Presets (a shipped ``configs/<kind>/<name>.yaml`` or any YAML file) with ``extends:`` chains,
merged one section deep, and the ``--set section.key=value`` overrides applied the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genolong.attention import attention_defaults
from genolong.config.schema import read_with_extends, require_mapping
from genolong.configs import preset_path


def switch_backbone(model: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``model | update``; when ``update`` changes the backbone, the old backbone's own parameters are
    dropped (a BigBird ``block_size`` means nothing to Longformer), so ``extends: bigbird`` plus
    ``model: {backbone: longformer}`` is a valid Longformer config."""
    old, new = model.get("backbone"), update.get("backbone", model.get("backbone"))
    if old is not None and new != old:
        stale = set(attention_defaults(old)) - set(attention_defaults(new))
        model = {k: v for k, v in model.items() if k not in stale}
    return model | update


def merge_preset(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``update`` one section deep (``model`` by :func:`switch_backbone`); a
    section that is not a mapping on either side is replaced (and refused later by the dataclass)."""
    merged = dict(base)
    for key, value in update.items():
        if not (isinstance(value, dict) and isinstance(merged.get(key, {}), dict)):
            merged[key] = value
        elif key == "model":
            merged[key] = switch_backbone(merged.get(key, {}), value)
        else:
            merged[key] = merged.get(key, {}) | value
    return merged


def read_preset(path: str | Path) -> dict[str, Any]:
    """A YAML preset with its ``extends:`` chain (parents beside it) merged in."""
    return read_with_extends(path, merge_preset)


def resolve_preset(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """Inline preset data whose ``extends`` names a shipped preset (or YAML file) of ``kind``."""
    data = dict(data)
    parent = data.pop("extends", None)
    return data if parent is None else merge_preset(read_preset(preset_path(kind, str(parent))), data)


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], source: str = "") -> dict[str, Any]:
    """``data`` (read from ``source``) with each dotted key of ``overrides`` (``train.max_steps``,
    ``max_len``) merged as a preset that ``extends`` it would be; ConfigError for a key in a section
    that ``data`` has as a scalar or a list."""
    for key, value in overrides.items():
        section, _, name = key.rpartition(".")
        if section:
            require_mapping(data.get(section), source, f"{section}.")
        data = merge_preset(data, {section: {name: value}} if section else {key: value})
    return data
