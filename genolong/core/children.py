"""Child processes: the one way a command starts another Python process (``genolong``, ``pytest``).

A child runs in a working directory of its own (``cwd``: typically the parent's output directory,
where no source checkout shadows the installed package), so a relative path means something else
there than where the user typed it. Every :class:`~pathlib.Path` handed to a child is therefore
made absolute in the parent's working directory first; other arguments pass as they are.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def child_arguments(arguments) -> list[str]:
    """``arguments`` as strings, each :class:`~pathlib.Path` made absolute in this process's working directory."""
    return [str(argument.absolute()) if isinstance(argument, Path) else str(argument) for argument in arguments]


def run_module(module: str, arguments, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGUMENTS`` in ``cwd`` with this interpreter, its output captured as text.

    Paths in ``arguments`` are made absolute (:func:`child_arguments`), so the child finds and writes
    what the parent means whatever ``cwd`` is."""
    command = [sys.executable, "-m", module, *child_arguments(arguments)]
    return subprocess.run(command, capture_output=True, text=True, cwd=Path(cwd).absolute())


def run_genolong(arguments, cwd: Path) -> subprocess.CompletedProcess:
    """``genolong ARGUMENTS`` in a child process (:func:`run_module` of ``genolong``, its ``__main__``)."""
    return run_module("genolong", arguments, cwd)
