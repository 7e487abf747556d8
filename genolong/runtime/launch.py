"""Which process of a distributed launch this is: the one reading of the launchers' environment variables.

Launchers name a process's place in different variables: torchrun sets ``RANK`` / ``WORLD_SIZE`` (and
``LOCAL_RANK``), SLURM ``SLURM_PROCID`` / ``SLURM_NTASKS``, and Lightning's own launcher starts ranks
1.. of a node with only ``LOCAL_RANK`` set and the node in ``NODE_RANK``. Every module that needs a rank asks
here (``tests/test_one_home.py`` fails on a rank variable read anywhere else). Standard library only, so that
the command line can ask before torch is imported.
"""

from __future__ import annotations

import os

#: Variables that hold a global rank, in the order they are trusted.
GLOBAL_RANK_VARIABLES = ("RANK", "SLURM_PROCID")
#: Variables that hold the number of processes of the launch.
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "SLURM_NTASKS")
#: Every variable that places a process; each is 0 (or unset) for the first process of a launch.
RANK_VARIABLES = (*GLOBAL_RANK_VARIABLES, "NODE_RANK", "LOCAL_RANK")


def _first_set(names: tuple[str, ...]) -> str | None:
    return next((os.environ[name].strip() for name in names if os.environ.get(name, "").strip()), None)


def global_rank() -> int:
    """This process's rank in the whole launch (0 when not launched; Lightning's launcher: ``LOCAL_RANK``)."""
    value = _first_set(GLOBAL_RANK_VARIABLES) or _first_set(("LOCAL_RANK",))
    return int(value) if value is not None else 0


def world_size() -> int:
    """The number of processes of the launch (1 when not launched)."""
    value = _first_set(WORLD_SIZE_VARIABLES)
    return int(value) if value is not None else 1


def processes_per_node() -> int:
    """How many processes of the launch share this node (torchrun: ``LOCAL_WORLD_SIZE``; SLURM:
    ``SLURM_NTASKS_PER_NODE``, whose ``2(x3)`` form counts the first figure; 1 when not launched)."""
    value = (_first_set(("LOCAL_WORLD_SIZE",)) or _first_set(("SLURM_NTASKS_PER_NODE",)) or "1").split("(")[0]
    return int(value) if value.isdigit() and int(value) > 0 else 1


def is_first_process() -> bool:
    """Whether this is the first process of the launch (or the only one): the process that prints, writes the
    shared outputs and holds their lock. False on every other rank of every node."""
    return all(os.environ.get(name, "0").strip() in ("", "0") for name in RANK_VARIABLES)


def rank_label() -> str:
    """This process's rank as a message names it (``"0"`` when not launched)."""
    return _first_set(GLOBAL_RANK_VARIABLES) or _first_set(("LOCAL_RANK",)) or "0"
