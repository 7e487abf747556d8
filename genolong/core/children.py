"""Child processes: the one way a command starts another Python process (``genolong``, ``pytest``), in a
working directory of its own, so every :class:`~pathlib.Path` handed to it is made absolute here first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def child_arguments(arguments) -> list[str]:
    """``arguments`` as strings, each :class:`~pathlib.Path` made absolute in this process's working directory."""
    return [str(argument.absolute()) if isinstance(argument, Path) else str(argument) for argument in arguments]


def run_module(module: str, arguments, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGUMENTS`` in ``cwd`` with this interpreter (paths absolute), output captured."""
    command = [sys.executable, "-m", module, *child_arguments(arguments)]
    return subprocess.run(command, capture_output=True, text=True, cwd=Path(cwd).absolute())


def run_genolong(arguments, cwd: Path) -> subprocess.CompletedProcess:
    """``genolong ARGUMENTS`` in a child process (:func:`run_module`)."""
    return run_module("genolong", arguments, cwd)
