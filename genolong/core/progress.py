"""Progress bars on standard error: tqdm's, shown on a terminal only.

A pseudo-terminal may report a size of 0 columns and 0 lines (``script`` or a CI runner without a
window size); tqdm then draws an empty bar, or none. :func:`progress_bar` gives such a terminal a
fixed size (``$COLUMNS`` x ``$LINES``, else 80 x 24), so that every command that runs for a while
shows its progress.
"""

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
    """A ``tqdm`` bar with ``kwargs``, on standard error and shown on a terminal only unless they
    say otherwise, and with a fixed size on a terminal that reports 0 columns."""
    from tqdm.auto import tqdm

    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("disable", None)  # None: shown on a terminal only
    if terminal_columns(kwargs["file"]) == 0 and kwargs.get("ncols") is None:
        kwargs["dynamic_ncols"] = False
        kwargs["ncols"] = int(os.environ.get("COLUMNS") or DEFAULT_SIZE[0])
        kwargs.setdefault("nrows", int(os.environ.get("LINES") or DEFAULT_SIZE[1]))  # tqdm hides bars below nrows
    return tqdm(**kwargs)
