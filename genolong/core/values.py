"""What counts as an integer or a number in a configuration: the one rule every check shares.

A YAML ``true`` is a Python ``bool``, which is an ``int`` subclass; no genolong setting takes a bool where it
takes a count or a number, so these predicates refuse bools.
"""

from __future__ import annotations

import math
from typing import Any


def is_integer(value: Any, minimum: int | None = None, maximum: int | None = None) -> bool:
    """Whether ``value`` is an int (not a bool) within ``[minimum, maximum]`` (either bound may be None)."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and (minimum is None or value >= minimum) and (maximum is None or value <= maximum))


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
