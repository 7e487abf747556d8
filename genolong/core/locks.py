"""One owner per output: an exclusive ``flock`` beside each output of a running command, taken by
:func:`genolong.cli.outputs.guarded`; it goes with the process that holds it, so a killed run leaves a
lock file that the next run simply takes over."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from pathlib import Path

from genolong.core.errors import UserError
from genolong.core.files import work_path


def lock_path(path: Path) -> Path:
    """The lock file of the output ``path``: ``.NAME.lock`` in its directory."""
    return work_path(os.path.abspath(path), "lock")


class OutputLock:
    """An exclusive ``flock`` on the lock file of an output, which names its owner (``pid N on HOST``) and
    is removed on release. A file replaced between opening and locking is opened again, so that two runs
    never hold locks on two files."""

    def __init__(self, path: Path, what: str):
        self.path = lock_path(path)
        self.what = what
        self.output = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise a UserError naming the run that holds it."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise UserError(f"{self.what} {self.output} is in use by another genolong run ({owner}); "
                                "wait for it to end or choose another output") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the previous owner removed it between our open and our lock
        self._fd = fd  # released (and removed) by release() from here on, even when the next write fails
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)

    def release(self) -> None:
        """Remove the lock file and drop the lock (in that order: a waiting run then opens a new file)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if _same_file(self._fd, self.path):
                self.path.unlink()
        os.close(self._fd)
        self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
