"""Argument types shared by the commands: ``type=positive_int`` refuses ``--stride 0`` at parse
time, with a message that names the option, instead of a command replacing it by a default.

Each raises ``argparse.ArgumentTypeError``; the CLI prints it as one line and exits with 2.
"""

from __future__ import annotations

import argparse
import math


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


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1]."""
    value = _finite(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1], got {text!r}")
    return value


def devices(text: str) -> int | str:
    """``--devices``: a positive number of devices per node, or ``auto``."""
    return text if text == "auto" else positive_int(text)


def add_device_arguments(parser) -> None:
    """``--accelerator``, ``--devices`` and ``--num-nodes`` of the commands that run Lightning's predict loop
    (:mod:`genolong.inference.loop`): more than one device or node shards the work across ranks."""
    parser.add_argument("--accelerator", default="auto", help="auto, cpu, gpu (Lightning)")
    parser.add_argument("--devices", type=devices, default=1,
                        help="devices per node, or auto (default: 1); more than one shards the work across processes")
    parser.add_argument("--num-nodes", type=positive_int, default=1, help="machines (default: 1)")
