"""Assertions on what the CLI printed."""

from __future__ import annotations


def one_line(capsys, *needles) -> str:
    """The command's single stderr line; it contains every needle and no traceback. The line announcing
    the precision (printed once a model is loaded, before an input error found later) is not counted."""
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("precision: ")]
    assert len(err) == 1 and "Traceback" not in err[0], err
    for needle in needles:
        assert needle in err[0], err[0]
    return err[0]
