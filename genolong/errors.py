"""User-facing errors.

A :class:`UserError` is a mistake the user can fix (bad input file, impossible
configuration, missing download). The CLI prints it as one line and exits with
status 2, without a traceback. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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
