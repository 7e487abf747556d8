"""YAML presets shipped with genolong (installed as ``genolong.configs``).

``configs/<kind>/<name>.yaml``: ``pretrain/`` (model sizes and backbones), ``finetune/``.
Every preset is loaded and built into a tiny model by the test suite.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from genolong.core.errors import UserError


def preset_dir(kind: str) -> Path:
    return Path(str(resources.files(__name__) / kind))


def available_presets(kind: str) -> list[str]:
    return sorted(p.stem for p in preset_dir(kind).glob("*.yaml"))


def preset_path(kind: str, name_or_path: str) -> Path:
    """A YAML path as given, or the shipped preset ``<kind>/<name>.yaml``."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UserError(f"{path}: no such config file")
        return path
    shipped = preset_dir(kind) / f"{name_or_path}.yaml"
    if not shipped.is_file():
        raise UserError(f"no {kind} preset {name_or_path!r}; shipped: {', '.join(available_presets(kind))}")
    return shipped
