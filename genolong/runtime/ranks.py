"""The ranks of a distributed run: no rank waits forever for another, and a dead rank is one line.

Every DDP strategy genolong builds (:func:`strategy`) has the :func:`collective_timeout`. Within
:func:`watched`, rank 0 watches the ranks Lightning's launcher starts (:class:`RankWatcher`, in place of
Lightning's observer, which SIGKILLs every rank without a word): a rank ending with a non-zero status, or
an error in a collective, SIGKILLs the other ranks (one waiting in a collective ignores SIGTERM) and ends
the command at once (``os._exit``: the main thread may be blocked in a collective) with one line and the
dead rank's status, or 1 (docs/reliability.md). A signal to the whole process group is not a dead rank.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from genolong.core import interrupts
from genolong.core.errors import UserError, first_line
from genolong.runtime.launch import rank_label

#: Seconds a rank waits in a collective (all-reduce, barrier, broadcast) before it gives up (room for the
#: longest step of a real run: a validation, a checkpoint rank 0 writes), unless :data:`TIMEOUT_VARIABLE`
#: says otherwise.
DEFAULT_TIMEOUT_S = 600
TIMEOUT_VARIABLE = "GENOLONG_COLLECTIVE_TIMEOUT"
#: How often rank 0 looks at the other ranks of its node (seconds): a dead rank stops the run
#: within about this time.
POLL_S = 1.0

_state: dict = {"command": "genolong", "hint": "run the same command again", "active": False}
_watchers: list[RankWatcher] = []


def collective_timeout() -> datetime.timedelta:
    """The collective timeout: :data:`TIMEOUT_VARIABLE` seconds (a UserError when it is not a positive
    number), else :data:`DEFAULT_TIMEOUT_S`."""
    value = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not value:
        return datetime.timedelta(seconds=DEFAULT_TIMEOUT_S)
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise UserError(f"{TIMEOUT_VARIABLE}={value}: not a positive number of seconds")
    return datetime.timedelta(seconds=seconds)


def strategy(name: str, devices, num_nodes: int):
    """The strategy to give Lightning for ``name`` (``auto``, ``ddp``...): for DDP (also ``auto`` on several
    devices or nodes), its object with the collective timeout and, within :func:`watched`, genolong's
    watcher in place of Lightning's; any other name as it is."""
    from lightning.pytorch.strategies import DDPStrategy, StrategyRegistry

    if name == "auto" and (num_nodes > 1 or isinstance(devices, int) and devices > 1):
        name = "ddp"
    entry = dict.get(StrategyRegistry, name, {})  # the registry's own get() builds the strategy
    if entry.get("strategy") is not DDPStrategy:
        return name
    if _state["active"]:
        from lightning.pytorch.strategies.launchers import subprocess_script

        subprocess_script._launch_process_observer = _watch
    return DDPStrategy(timeout=collective_timeout(), **entry["init_params"])


def set_resume_hint(hint: str) -> None:
    """What the command keeps and how it resumes, for the line about a dead rank (``the same command ...``)."""
    _state["hint"] = hint


def _describe(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"ended with exit status {returncode}"


def _end(message: str, status: int) -> None:
    """Print the command's one line and end the process now, whatever its other threads do."""
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{_state['command']}: {message}\n")
        sys.stderr.flush()
    os._exit(status)


class RankWatcher(threading.Thread):
    """Rank 0's watch over ``children``, the processes of ranks 1.. of its node in rank order (Lightning's
    launcher's children), every :data:`POLL_S` s; see the module docstring."""

    def __init__(self, children: list[subprocess.Popen]):
        super().__init__(daemon=True, name="genolong-rank-watcher")
        self.children = children
        self.dead = threading.Event()
        self.finished = False

    def run(self) -> None:
        while not self.finished:
            time.sleep(POLL_S)
            codes = [child.poll() for child in self.children]
            if all(code == 0 for code in codes) or interrupts.last_signal() is not None:
                return  # all done; or a signal to the whole process group, which every rank answers itself
            for rank, (child, code) in enumerate(zip(self.children, codes, strict=True), start=1):
                if code:
                    self.dead.set()
                    self.stop_all(f"rank {rank} (pid {child.pid}) {_describe(code)}; the other ranks were stopped; "
                                  f"{_state['hint']}", 128 - code if code < 0 else code)

    def stop_all(self, message: str, status: int) -> None:
        """SIGKILL every other rank, then end this one with ``message`` and ``status``."""
        for child in self.children:
            with contextlib.suppress(OSError):
                child.send_signal(signal.SIGKILL)
        _end(message, status)


def _watch(children: list[subprocess.Popen]) -> None:
    """Stands in for Lightning's ``_launch_process_observer``."""
    watcher = RankWatcher(children)
    _watchers.append(watcher)
    watcher.start()


def _is_collective_error(err: BaseException) -> bool:
    import torch.distributed as dist

    return isinstance(err, dist.DistError) or isinstance(err, RuntimeError) and "gloo" in str(err).lower()


@contextlib.contextmanager
def watched(command: str) -> Iterator[None]:
    """Within the block, rank 0 watches the ranks it launches; ``command`` (``genolong scan``) starts the line
    about a dead rank."""
    _state.update(command=command, hint="run the same command again", active=True)
    try:
        yield
    except BaseException as err:
        if not _is_collective_error(err):
            raise
        watcher = _watchers[-1] if _watchers else None
        if watcher is not None and watcher.dead.wait(3 * POLL_S):  # a rank died: the watcher ends with its line
            time.sleep(3 * POLL_S)
        if "timed out" in str(err).lower():
            why = (f"no answer from another rank within {collective_timeout().total_seconds():g} s ({TIMEOUT_VARIABLE}; "
                   "a hung or stopped rank)")
        elif "closed by peer" in str(err) or "reset by peer" in str(err):
            why = "another rank of the run has ended (its connection closed)"
        else:
            why = first_line(err)
        if watcher is not None:
            watcher.stop_all(f"rank 0: {why}; the other ranks were stopped; {_state['hint']}", 1)
        _end(f"rank {rank_label()}: {why}; {_state['hint']}", 1)
    finally:
        _state["active"] = False
        launchers = sys.modules.get("lightning.pytorch.strategies.launchers.subprocess_script")
        if launchers is not None and launchers._launch_process_observer is _watch:  # Lightning's own again
            from lightning.fabric.strategies.launchers.subprocess_script import _launch_process_observer

            launchers._launch_process_observer = _launch_process_observer
        for watcher in _watchers:
            watcher.finished = True
        _watchers.clear()
