"""SIGINT and SIGTERM, handled alike: both unwind the program as an exception.

Python turns SIGINT (Ctrl-C) into :class:`KeyboardInterrupt`, but SIGTERM (sent by
``timeout``, ``kill``, batch schedulers, ``docker stop``) kills the process at once: no
``finally`` block runs and temporary files stay behind. While :func:`handled` is active
(the CLI wraps every command in it) both signals raise :class:`SignalInterrupt`, so every
``with atomic_path(...)`` block removes its temporary file and the CLI exits with status
``128 + signal number``: 130 for SIGINT, 143 for SIGTERM.

The API other modules rely on:

* :class:`SignalInterrupt` subclasses :class:`KeyboardInterrupt`, so code that already
  handles Ctrl-C treats SIGTERM the same way. It carries ``signum``, ``exit_code`` and a
  one-line ``message``. (Lightning's ``Trainer.fit`` handles a KeyboardInterrupt itself:
  it tears down, calls ``on_exception`` on its callbacks, then ``sys.exit(1)``; a training
  command that wants its own line and exit status acts before that, e.g. in
  ``on_exception``.)
* :func:`last_signal` says which signal stopped the run, for code that catches the
  interrupt itself (a training loop that saves a checkpoint and returns).
* A second signal while the first one unwinds is ignored, so that clean-up finishes; a
  third one raises again.
* :func:`ignore_in_worker` is the ``worker_init_fn`` of every DataLoader with worker
  processes: a terminal's Ctrl-C, ``timeout``, SLURM and ``docker stop`` signal the whole
  process group, and a worker killed by the signal would end the run with "DataLoader worker
  is killed by signal" (exit 1, a long traceback). The workers leave the signal to the main
  process, which stops and shuts them down.
* :func:`stop` raises the interrupt again with a message of the caller's, e.g.
  ``stop("stopped at step 120; continue with --resume")``; the CLI prints it as its one line.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import NoReturn

#: The signals turned into :class:`SignalInterrupt`.
HANDLED = (signal.SIGINT, signal.SIGTERM)

_received: list[int] = []


class SignalInterrupt(KeyboardInterrupt):
    """The run was stopped by a signal; ``exit_code`` is ``128 + signum`` (130 SIGINT, 143 SIGTERM)."""

    def __init__(self, signum: int, message: str | None = None):
        self.signum = int(signum)
        self.message = message or f"interrupted by {signal_name(self.signum)}"
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return self.message


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15, and so on."""
    return signal.Signals(signum).name


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """The exit status for an interrupt: ``128 + signum``; 130 for a plain KeyboardInterrupt."""
    return interrupt.exit_code if isinstance(interrupt, SignalInterrupt) else 128 + signal.SIGINT


def last_signal() -> int | None:
    """The signal number of the latest interrupt while :func:`handled` was active, or None."""
    return _received[-1] if _received else None


def stop(message: str) -> NoReturn:
    """Raise the interrupt that stopped the run again, with ``message`` as the CLI's line.

    For code that caught the interrupt, saved its state and now ends the command: the exit
    status stays that of the signal received (130 when none was recorded)."""
    raise SignalInterrupt(last_signal() or signal.SIGINT, message)


def ignore_in_worker(worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: the worker ignores SIGINT and SIGTERM (see the module docstring)."""
    for signum in HANDLED:
        signal.signal(signum, signal.SIG_IGN)


def _raise(signum: int, frame) -> None:
    _received.append(signum)
    if len(_received) != 2:  # the second signal must not cut the first one's clean-up short; a third may
        raise SignalInterrupt(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`SignalInterrupt`; the previous
    handlers come back afterwards. Outside the main thread (where Python cannot install
    handlers) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise) for signum in HANDLED}
    _received.clear()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
