"""Assertions on what the CLI printed."""

from __future__ import annotations


def one_line(capsys, *needles) -> str:
    """The command's single stderr line; it contains every needle and no traceback."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for needle in needles:
        assert needle in err[0], err[0]
    return err[0]
