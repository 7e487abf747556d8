"""Progress bars on standard error: tqdm's, shown on a terminal only, with a fixed size on a
pseudo-terminal that reports 0 columns (``script``, a CI runner), where tqdm would draw none."""

from __future__ import annotations

import os
import sys
from typing import Any

#: Columns and lines of a terminal that reports none, unless ``$COLUMNS`` and ``$LINES`` say otherwise.
DEFAULT_SIZE = (80, 24)


def terminal_columns(stream) -> int | None:
    """Columns of the terminal ``stream`` writes to; None when it is no terminal."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return None


def progress_bar(**kwargs: Any):
    """A ``tqdm`` bar with ``kwargs``, on standard error and shown on a terminal only unless they say
    otherwise; ``$COLUMNS`` x ``$LINES`` (else :data:`DEFAULT_SIZE`) on a terminal that reports 0 columns."""
    from tqdm.auto import tqdm

    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("disable", None)  # None: shown on a terminal only
    if terminal_columns(kwargs["file"]) == 0 and kwargs.get("ncols") is None:
        kwargs["dynamic_ncols"] = False
        kwargs["ncols"] = int(os.environ.get("COLUMNS") or DEFAULT_SIZE[0])
        kwargs.setdefault("nrows", int(os.environ.get("LINES") or DEFAULT_SIZE[1]))  # tqdm hides bars below nrows
    return tqdm(**kwargs)
