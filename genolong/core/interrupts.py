"""SIGINT and SIGTERM, handled alike: both unwind the program as an exception.

While :func:`handled` is active (the CLI wraps every command in it) both signals raise
:class:`SignalInterrupt`, a :class:`KeyboardInterrupt`, so every ``with atomic_path(...)`` block
removes its temporary file and the CLI exits with ``128 + signal number`` (130 SIGINT, 143 SIGTERM).
A second signal while the first one unwinds is ignored, so that clean-up finishes; a third raises
again. (Lightning's ``Trainer.fit`` turns a KeyboardInterrupt into ``sys.exit(1)`` after calling
``on_exception`` on its callbacks: a training command that wants its own line and status acts there.)
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
        self.exit_code = 128 + self.signum
        self.message = message or f"interrupted by {signal_name(self.signum)}"
        super().__init__(self.message)


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
    """Raise the interrupt that stopped the run again, with ``message`` as the CLI's line (for code that
    saved its state on it): the exit status stays that of the signal received (130 when none was)."""
    raise SignalInterrupt(last_signal() or signal.SIGINT, message)


def ignore_in_worker(worker_id: int) -> None:
    """The ``worker_init_fn`` of every DataLoader with workers: the worker ignores SIGINT and SIGTERM, which
    a terminal, ``timeout`` or SLURM send the whole process group, and leaves them to the main process
    (a worker killed by one would end the run with "DataLoader worker is killed by signal")."""
    for signum in HANDLED:
        signal.signal(signum, signal.SIG_IGN)


def _raise(signum: int, frame) -> None:
    _received.append(signum)
    if len(_received) != 2:  # the second signal must not cut the first one's clean-up short; a third may
        raise SignalInterrupt(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`SignalInterrupt`; the previous handlers come
    back afterwards. Outside the main thread (no handlers can be installed) the block runs unchanged."""
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
