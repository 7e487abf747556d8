"""User-facing errors: a :class:`UserError` is a mistake the user can fix (bad input, impossible
configuration, missing download), printed by the CLI as one line with exit status 2; anything else
is a bug and keeps its traceback."""

from __future__ import annotations

import errno
import os
import re
import shutil


class UserError(Exception):
    """An error caused by the user's input or environment; printed as one line, exit 2."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class InputError(UserError):
    """A malformed input file: names the file and, where known, the line or record."""

    def __init__(self, path, message: str, *, line: int | None = None, record: str | None = None,
                 hint: str | None = None):
        where = str(path)
        if line is not None:
            where += f":{line}"
        if record is not None:
            where += f" (record {record!r})"
        super().__init__(f"{where}: {message}", hint=hint)
        self.path = path
        self.line = line
        self.record = record


class ConfigError(UserError, ValueError):
    """An impossible configuration, raised at construction time."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (third-party messages can span many lines)."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def is_library_failure(err: BaseException) -> bool:
    """Whether ``err`` is a third-party library's failure on a bad file rather than a signal or
    exit: Rust extensions (tokenizers, safetensors) raise panics that derive from BaseException."""
    return not isinstance(err, KeyboardInterrupt | SystemExit | GeneratorExit)


#: The errors of a file system that takes no more data: full, over quota, read-only.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write refused by a full, over-quota or read-only file system: an
    OSError, or a Rust extension's error (tokenizers, safetensors) ending ``(os error 28)``."""
    return _errno(err) in DISK_FULL


def _errno(err: BaseException) -> int | None:
    if isinstance(err, OSError):
        return err.errno
    found = re.search(r"\(os error (\d+)\)\s*$", str(err)) if isinstance(err, Exception) else None
    return int(found.group(1)) if found else None


def disk_full_error(err: Exception, where: str | os.PathLike, kept: str) -> UserError:
    """The one line for :func:`disk_full` ``err`` while writing ``where`` (a path, or an option and
    its path): the reason, the file named by the error, the space left there and what is ``kept``."""
    name = getattr(err, "filename", None)
    filename = f" ({name})" if name and str(name) not in str(where) else ""
    probe = os.fspath(name) if name else os.fspath(where).split(" ")[-1]
    free = ""
    while probe:
        try:
            free = f"; {shutil.disk_usage(probe).free / 2**20:.1f} MiB free there"
            break
        except OSError:
            if os.path.dirname(probe) == probe:
                break
            probe = os.path.dirname(probe)
    reason = os.strerror(_errno(err)).lower()
    return UserError(f"writing {where}{filename}: {reason}{free}; {kept}")
