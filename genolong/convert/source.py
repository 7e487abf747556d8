"""Reading a transformers checkpoint directory (a hub snapshot): ``config.json``, the weights
(:data:`WEIGHT_FILES`) and the tokenizer, running no code from it (``torch.load(weights_only=True)``,
transformers' built-in tokenizer classes). :class:`Weights` remembers which tensors a converter
took, so that a conversion refuses weights it did not understand rather than silently drop them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from genolong.core.errors import UserError

#: Weight files in the order they are looked for; an index lists the shards of a split checkpoint.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


class ConversionError(UserError):
    """A checkpoint that cannot be converted exactly; the message names what is missing."""


@dataclass
class SourceCheckpoint:
    """A transformers checkpoint read from disk: ``config.json`` as a dict, every tensor by its
    saved name, the tokenizer."""

    path: Path
    config: dict[str, Any]
    weights: dict[str, torch.Tensor]
    tokenizer: PreTrainedTokenizerBase


def read_source(path: str | Path) -> SourceCheckpoint:
    """Read ``path`` (config, weights, tokenizer), or raise ConversionError naming what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise ConversionError(f"{path}: no such directory")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ConversionError(f"{path} is not a transformers checkpoint (no config.json)")
    try:
        config = json.loads(config_path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ConversionError(f"{config_path}: not valid JSON ({err})") from None
    if isinstance(config, dict) and infer_model_type(config):
        config["model_type"] = infer_model_type(config)
    if not isinstance(config, dict) or "model_type" not in config:
        raise ConversionError(f"{config_path} has no model_type")
    return SourceCheckpoint(path, config, read_weights(path), read_tokenizer(path))


#: Config keys that name an architecture run by remote code, whose config.json has no
#: ``model_type`` or the one of the class it extends: MosaicBERT's ALiBi size (DNABERT-2; its
#: fine-tuned checkpoints say ``bert``).
MODEL_TYPE_KEYS = {"alibi_starting_size": "mosaic_bert"}


def infer_model_type(config: dict[str, Any]) -> str | None:
    """The architecture a config's own keys name, over its ``model_type`` (None: none named)."""
    return next((model_type for key, model_type in MODEL_TYPE_KEYS.items() if key in config), None)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of the checkpoint in ``path``, from the first of :data:`WEIGHT_FILES` present."""
    found = next((path / name for name in WEIGHT_FILES if (path / name).is_file()), None)
    if found is None:
        raise ConversionError(f"{path} holds no weights (looked for {', '.join(WEIGHT_FILES)})")
    files = [found]
    if found.name.endswith(".index.json"):
        files = [path / shard for shard in sorted(set(json.loads(found.read_text())["weight_map"].values()))]
    weights: dict[str, torch.Tensor] = {}
    for file in files:
        if not file.is_file():
            raise ConversionError(f"{found} names the shard {file.name}, which is missing")
        try:
            if file.suffix == ".safetensors":
                weights.update(load_file(str(file)))
            else:
                weights.update(torch.load(file, map_location="cpu", weights_only=True))
        except Exception as err:  # safetensors and torch raise their own types for a damaged file
            raise ConversionError(f"{file}: unreadable weights ({type(err).__name__}: {err})") from None
    return weights


def read_tokenizer(path: Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in ``path``: ``tokenizer.json`` when there is one, else the tokenizer
    class transformers recognises from ``tokenizer_config.json`` (never remote code)."""
    try:
        if (path / "tokenizer.json").is_file():
            return PreTrainedTokenizerFast.from_pretrained(str(path))
        if (path / "tokenizer_config.json").is_file() or (path / "vocab.txt").is_file():
            return AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except (OSError, ValueError) as err:
        raise ConversionError(f"{path}: the tokenizer does not load ({err})") from None
    raise ConversionError(f"{path} has no tokenizer (no tokenizer.json, tokenizer_config.json or vocab.txt)")


class Weights:
    """A checkpoint's ``tensors`` under their names without the base model's ``prefix``
    (``"bert."``, ``"esm."``); :meth:`take` marks a tensor used, :meth:`unused` lists the others
    but the ``ignored`` name prefixes (weights the target model does not need: the NSP head, ...)."""

    def __init__(self, tensors: dict[str, torch.Tensor], prefix: str, ignored: tuple[str, ...] = ()):
        self.tensors = {name.removeprefix(prefix): tensor for name, tensor in tensors.items()}
        self.ignored = ignored
        self.used: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self.tensors

    def take_first(self, *names: str) -> torch.Tensor:
        """:meth:`take` of the first of ``names`` the checkpoint has (else of the last)."""
        return self.take(next((name for name in names if name in self.tensors), names[-1]))

    def take(self, name: str) -> torch.Tensor:
        """The tensor ``name`` (float32); ConversionError when the checkpoint lacks it."""
        if name not in self.tensors:
            raise ConversionError(f"the checkpoint lacks the weight {name!r}")
        self.used.add(name)
        return self.tensors[name].float()

    def linear(self, name: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``name.weight`` and ``name.bias`` (None for a layer saved without a bias; the model
        built from the converted config refuses a missing bias it needs)."""
        bias = f"{name}.bias"
        return self.take(f"{name}.weight"), self.take(bias) if bias in self.tensors else None

    def unused(self) -> list[str]:
        """Names neither taken nor ignored."""
        return sorted(n for n in self.tensors if n not in self.used and not n.startswith(self.ignored))
