"""Arguments shared by the commands: types that refuse a bad value at parse time in one line
(``--stride 0``: ``argparse.ArgumentTypeError``, exit 2), ``--model``, device and precision arguments,
and the config overrides of the training commands (:func:`add_config_arguments`)."""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from genolong.config import parse_assignment
from genolong.core.errors import ConfigError
from genolong.runtime import precision

T = TypeVar("T")


def precision_choice(text: str) -> str:
    """argparse type of ``--precision``: ``auto``, ``32`` or ``bf16`` (aliases accepted)."""
    try:
        return precision.normalized_precision(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_precision_argument(parser) -> None:
    """Add ``--precision {auto,32,bf16}`` (default ``auto``)."""
    parser.add_argument(
        "--precision", type=precision_choice, default="auto", metavar="{auto,32,bf16}",
        help="auto (default): bf16 autocast on a GPU that supports it and on a CPU with native bf16 "
        "(avx512_bf16/amx_bf16) where a timed matrix product confirms it, else float32; 32: float32; "
        f"bf16: bf16 autocast. ${precision.ENV} decides auto when set")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _checked(read: Callable[[str], Any], accept: Callable[[Any], bool], rule: str) -> Callable[[str], Any]:
    """The argparse type that reads a value with ``read`` and refuses one ``accept`` rejects."""

    def convert(text: str):
        value = read(text)
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text!r}")
        return value

    return convert


#: An integer >= 1.
positive_int = _checked(_integer, lambda value: value >= 1, "must be a positive integer")
#: An integer >= 0.
non_negative_int = _checked(_integer, lambda value: value >= 0, "must be an integer >= 0")
#: A finite number > 0.
positive_float = _checked(_finite, lambda value: value > 0, "must be a positive number")
#: A number in [0, 1].
fraction = _checked(_finite, lambda value: 0.0 <= value <= 1.0, "must be a fraction in [0, 1]")


#: ``--model default``: the promoter classifier shipped with genolong.
SHIPPED_MODEL = "default"


def model_directory(text: str) -> Path:
    """``--model``: a model directory, or a run directory that holds one as ``model/`` (for ``RUN/model``)."""
    path = Path(text)
    if not (path / "config.json").is_file() and (path / "model" / "config.json").is_file():
        return path / "model"
    return path


def classifier_directory(text: str) -> Path:
    """``--model`` of a command that runs a classifier: :func:`model_directory`, or ``default`` for the
    shipped promoter model (a directory named ``default`` is ``./default``)."""
    from genolong.resources import promoter_model

    return promoter_model() if text == SHIPPED_MODEL else model_directory(text)


def add_model_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """The required ``--model`` of a command that runs any model directory (:func:`model_directory`)."""
    parser.add_argument("--model", type=model_directory, required=True, metavar="DIR",
                        help=f"{what} directory, or a pretrain/finetune run directory (RUN stands for RUN/model)")


def add_classifier_argument(parser: argparse.ArgumentParser, what: str = "classifier", *,
                            required: bool = False, promoter: bool = True) -> None:
    """``--model`` of a command that runs a classifier (:func:`classifier_directory`), ``default`` unless
    ``required``; ``promoter`` False: a command that refuses promoter models (its help offers no default)."""
    shipped = ", or default for the shipped promoter model" + ("" if required else " (the default)")
    shipped = shipped if promoter else ""
    parser.add_argument("--model", type=classifier_directory, required=required,
                        default=None if required else SHIPPED_MODEL, metavar="DIR",
                        help=f"{what} directory, or a fine-tuning run directory (RUN stands for RUN/model){shipped}")


class _DeprecatedOption(argparse.Action):
    """Stores its value as the action it stands for would, after one line on stderr naming the new spelling."""

    def __init__(self, option_strings, dest, *, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog} {option_string}: deprecated, use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated_option(parser: argparse.ArgumentParser, old: str, new: str, *, dest: str | None = None,
                          **kwargs) -> None:
    """``old``, the former spelling of ``new``, kept for one release: it takes ``kwargs`` as ``new`` does and
    prints one deprecation line (``genolong task prepare --bed: deprecated, use --regions``). ``dest``
    (default: ``new``'s) is another destination where ``new`` is a positional argument, which argparse
    would otherwise reset to its default after ``old`` is read."""
    parser.add_argument(old, action=_DeprecatedOption, new=new, dest=dest or new.lstrip("-").replace("-", "_"),
                        help=f"deprecated spelling of {new}, kept for one release", **kwargs)


def devices(text: str) -> int | str:
    """``--devices``: a positive number of devices per node, or ``auto``."""
    return text if text == "auto" else positive_int(text)


def add_device_arguments(parser) -> None:
    """``--accelerator``, ``--devices``, ``--num-nodes`` and ``--precision`` of the commands that run
    Lightning's predict loop, which shards the work across the ranks of several devices or nodes."""
    parser.add_argument("--accelerator", default="auto", help="auto, cpu, gpu (Lightning)")
    parser.add_argument("--devices", type=devices, default=1,
                        help="devices per node, or auto (default: 1); more than one shards the work across processes")
    parser.add_argument("--num-nodes", type=positive_int, default=1, help="machines (default: 1)")
    add_precision_argument(parser)


def training_devices(text: str) -> int | str:
    """``--devices`` of a training run: a number, or ``auto`` or GPU indices ``0,1`` (the config checks)."""
    return int(text) if text.isdigit() else text


def assignment(text: str) -> tuple[str, Any]:
    """``--set section.key=value``: the key and the value read as YAML."""
    try:
        return parse_assignment(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(err.message) from None


@dataclass(frozen=True)
class Shortcut:
    """A flag that sets one config key: ``--max-steps 5`` is ``--set train.max_steps=5``."""

    flag: str
    key: str
    type: Callable[[str], Any]
    help: str


#: The config flags of the training commands; each command adds the ones it offers.
SHORTCUTS = {shortcut.flag: shortcut for shortcut in (
    Shortcut("--backbone", "model.backbone", str, "the attention (full, bigbird, longformer, ...)"),
    Shortcut("--max-steps", "train.max_steps", int, "optimizer steps"),
    Shortcut("--val-every", "train.val_every_steps", int, "validate every N steps"),
    Shortcut("--batch-size", "train.batch_size", int, "inputs per device per micro-batch"),
    Shortcut("--learning-rate", "train.learning_rate", float, "peak learning rate"),
    Shortcut("--seed", "train.seed", int, "the run seed"),
    Shortcut("--devices", "train.devices", training_devices, "Lightning devices (e.g. 2, or auto)"),
    Shortcut("--num-nodes", "train.num_nodes", int, "machines"),
    Shortcut("--strategy", "train.strategy", str, "Lightning strategy (ddp for multi-GPU / multi-node)"),
    Shortcut("--accelerator", "train.accelerator", str, "cpu, gpu or auto"),
    Shortcut("--precision", "train.precision", str, "auto (bf16 autocast on a GPU or a CPU with fast native bf16, "
             "else float32), 32, bf16, or a Lightning precision (32-true, bf16-mixed, 16-mixed)"),
    Shortcut("--mode", "mode", str, "which weights train: full, lora (adapters; lora.rank, lora.alpha, "
             "lora.dropout, lora.targets) or probe (the head only)"),
)}  # fmt: skip


def add_config_arguments(parser: argparse.ArgumentParser, shortcuts: Iterable[str]) -> None:
    """``--set SECTION.KEY=VALUE`` (repeatable) and the ``shortcuts`` flags (keys of :data:`SHORTCUTS`)."""
    for flag in shortcuts:
        shortcut = SHORTCUTS[flag]
        parser.add_argument(flag, dest=shortcut.key, type=shortcut.type, default=None,
                            metavar=flag.lstrip("-").upper().replace("-", "_"),
                            help=f"{shortcut.help}; same as --set {shortcut.key}=VALUE")
    parser.add_argument("--set", dest="overrides", metavar="SECTION.KEY=VALUE", type=assignment, action="append",
                        default=[], help="set any config key, e.g. --set train.warmup_steps=10 --set "
                        "model.hidden_dropout_prob=0.2 (the value is YAML; repeatable)")


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The dotted config overrides in ``args``: the shortcut flags, then each ``--set`` (a later one wins)."""
    given = {s.key: getattr(args, s.key) for s in SHORTCUTS.values() if getattr(args, s.key, None) is not None}
    return given | dict(args.overrides)


def from_arguments(target: Callable[..., T], args: argparse.Namespace, **given: Any) -> T:
    """Call ``target`` (a library function or config class) with every argument of ``args`` named like one
    of its parameters, and ``given`` (which win): a command's options passed on to the library."""
    parameters = inspect.signature(target).parameters
    return target(**{name: getattr(args, name) for name in parameters if hasattr(args, name)} | given)


def add_strands_argument(parser, what: str) -> None:
    """``--rc`` / ``--no-rc``: ``what`` averaging both strands does; unset (None), the model decides."""
    parser.add_argument("--rc", action=argparse.BooleanOptionalAction, default=None,
                        help=f"{what} (default: on for a model trained on both strands; --no-rc: one strand)")
