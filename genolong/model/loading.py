"""Saving and loading genolong model directories, all or nothing.

A model directory holds ``config.json`` (a :class:`~genolong.model.configuration.GenolongConfig`),
``model.safetensors`` and the model's tokenizer (``tokenizer.json``, ``tokenizer_config.json``).
:func:`save_model` stamps the tokenizer's :func:`~genolong.dna.tokenizer.tokenizer_fingerprint`
into the config; :func:`load_model` and :func:`load_model_tokenizer` refuse, with an
:class:`~genolong.core.errors.InputError` naming the file, what would give a model that runs but
predicts garbage: an unreadable or non-genolong ``config.json``; a missing or truncated
``model.safetensors``; any weight missing, unused or of another shape (``from_pretrained`` would
initialise or drop it with a warning), unless the caller declares it new or dropped; a tokenizer
whose fingerprint differs from the saved one. Directories saved before the fingerprint existed
load with a warning if their tokenizer has the model's vocabulary size.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import safe_open
from transformers.utils import logging as hf_logging

from genolong.core.errors import ConfigError, InputError, UserError, first_line, is_library_failure
from genolong.dna.tokenizer import load_tokenizer, tokenizer_fingerprint
from genolong.model.configuration import GenolongConfig
from genolong.model.modeling import GenolongModel

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def save_model(model, tokenizer, directory: str | Path) -> None:
    """``save_pretrained`` of ``model`` (its config stamped with the tokenizer's fingerprint) and
    ``tokenizer`` into the existing directory ``directory`` (callers write into a temporary one)."""
    model.config.tokenizer_fingerprint = tokenizer_fingerprint(tokenizer)
    with _transformers_quiet():
        model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))


def read_model_config(directory: str | Path, **overrides) -> GenolongConfig:
    """The validated ``GenolongConfig`` of a model directory, with ``overrides`` applied."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such model directory")
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise UserError(f"{directory} is not a genolong model directory (no {CONFIG_FILE})",
                        hint="give the run directory of `genolong pretrain` or `finetune` (RUN or RUN/model)")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError) as err:
        raise InputError(path, f"invalid JSON: {err}") from None
    if not isinstance(data, dict) or data.get("model_type") != GenolongConfig.model_type:
        got = data.get("model_type") if isinstance(data, dict) else type(data).__name__
        raise InputError(path, f"not a genolong model config (model_type {got!r})")
    data.pop("model_type")
    data.pop("transformers_version", None)
    try:
        return GenolongConfig(**(data | overrides))
    except (ConfigError, TypeError, ValueError) as err:
        raise InputError(path, str(err)) from None


def backbone_keys(config: GenolongConfig) -> set[str]:
    """``genolong.``-prefixed state-dict keys of the encoder of a model with ``config`` (built on
    the meta device: no memory); compare two configs to find a backbone's own weights."""
    return {f"genolong.{key}" for key in _meta_encoder(config).state_dict()}


def attention_buffer_keys(config: GenolongConfig) -> set[str]:
    """``genolong.``-prefixed keys of the attention buffers of a model with ``config``: tensors its
    attention derives from the config (a seeded random layout), not learned weights."""
    return {f"genolong.{key}" for key, _ in _meta_encoder(config).named_buffers() if ".attention." in key}


def _meta_encoder(config: GenolongConfig) -> GenolongModel:
    with torch.device("meta"):
        return GenolongModel(config)


def load_model(model_class, directory: str | Path, *, config: GenolongConfig | None = None,
               new: Collection[str] = (), dropped: Collection[str] = ()):
    """``model_class.from_pretrained(directory)`` in eval mode, with ``config`` (default: the
    directory's), an InputError (module docstring) on any weight that did not load.

    Args:
        new: weights the caller expects the file to lack (initialised afresh): exact keys, or
            prefixes ending in ``.`` (``"classifier."``).
        dropped: weights the caller expects the file to have and the model not to use, likewise.
    """
    directory = Path(directory)
    config = read_model_config(directory) if config is None else config
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise InputError(directory, f"no {WEIGHTS_FILE}: the model directory is incomplete")
    try:  # the header check finds a truncated or corrupt file before transformers does, with its own message
        with safe_open(str(weights), framework="pt") as handle:
            handle.keys()
    except BaseException as err:  # safetensors raises SafetensorError or a Rust panic
        if not is_library_failure(err):
            raise
        raise InputError(weights, f"cannot read the weights ({first_line(err)})",
                         hint="the file is truncated or corrupt; copy or save the model again") from None
    with _transformers_quiet():
        model, loading = model_class.from_pretrained(str(directory), config=config, output_loading_info=True,
                                                     ignore_mismatched_sizes=True)
    mismatched = sorted(key for key, *_ in loading["mismatched_keys"])
    problems = {
        "missing": sorted(k for k in loading["missing_keys"] if not _matches(k, new)) + [
            k for k in mismatched if not _matches(k, new)],
        "unexpected": sorted(k for k in loading["unexpected_keys"] if not _matches(k, dropped)),
    }
    if any(problems.values()):
        described = "; ".join(f"{len(keys)} {kind} ({_examples(keys)})" for kind, keys in problems.items() if keys)
        raise InputError(weights, f"the weights do not match the {model_class.__name__} of {CONFIG_FILE}: "
                         f"{described}", hint="was the file renamed, edited or saved by another model?")
    return model.eval()


def load_model_tokenizer(directory: str | Path, config: GenolongConfig):
    """The tokenizer saved in ``directory``, checked against ``config`` (:func:`check_tokenizer`)."""
    tokenizer = load_tokenizer(directory)
    check_tokenizer(tokenizer, config, Path(directory))
    return tokenizer


def check_tokenizer(tokenizer, config: GenolongConfig, directory: Path) -> None:
    """Raise InputError unless ``tokenizer`` is the one the model of ``directory`` (with ``config``)
    was saved with (module docstring)."""
    if len(tokenizer) != config.vocab_size:
        raise InputError(directory / "tokenizer.json", f"{len(tokenizer)} tokens for a model of vocab_size="
                         f"{config.vocab_size}: not the tokenizer the model was trained with")
    if config.tokenizer_fingerprint is None:
        log.warning("%s was saved without a tokenizer fingerprint (by an older genolong): its tokenizer has the "
                    "model's vocabulary size, but cannot be checked further", directory)
    elif tokenizer_fingerprint(tokenizer) != config.tokenizer_fingerprint:
        raise InputError(directory / "tokenizer.json", "not the tokenizer the model was trained with (its "
                         f"fingerprint differs from tokenizer_fingerprint in {CONFIG_FILE})",
                         hint="put the model's own tokenizer back beside it")


def _matches(key: str, allowed: Collection[str]) -> bool:
    return key in allowed or any(a.endswith(".") and key.startswith(a) for a in allowed)


def _examples(keys: list[str], shown: int = 3) -> str:
    return ", ".join(keys[:shown]) + (f", ... {len(keys) - shown} more" if len(keys) > shown else "")


@contextmanager
def _transformers_quiet():
    """No progress bar or load report from transformers (they would garble the CLI's stderr)."""
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
