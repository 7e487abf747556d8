"""One section of ``genolong bench gpu`` in a process of its own, stopped at its time budget.

A section is a function ``(plan, out, say)`` that yields (or returns) result rows. The child process
(started with ``spawn``, as CUDA requires) appends each row to ``OUT/NAME.rows.jsonl`` the moment it
has it and prints the section's lines to the shared standard output. The parent waits at most the
section's budget; past it the child is ended (SIGTERM, then SIGKILL after :data:`GRACE_S`) and the
section's result is the rows written so far plus one row saying it was stopped. So a section that
runs long costs its own budget, never the others' time, and its finished measurements are kept;
GPU memory is released with the process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

#: Seconds a stopped section's process gets to end after SIGTERM before it is killed.
GRACE_S = 5.0


def run_section(name: str, section: Callable, plan, out: Path, budget_s: float,
                say: Callable[[str], None]) -> list[dict]:
    """Run ``section`` (a module-level function, so that the child can import it; its rows go by ``name``) in
    a child process for at most ``budget_s`` seconds; its rows, then a ``stopped`` row if the budget ran out
    or an ``error`` row if the process died without reporting. ``plan`` must pickle (a ``CheckPlan``)."""
    rows_path = out / f"{name}.rows.jsonl"
    rows_path.unlink(missing_ok=True)
    sys.stdout.flush()
    child = multiprocessing.get_context("spawn").Process(target=_child, args=(name, section, plan, out, rows_path))
    started = time.monotonic()
    child.start()
    try:
        child.join(budget_s)
        stopped = child.is_alive()
    finally:  # the budget ran out, or this process is being stopped (Ctrl-C): end the section's whole group
        if child.is_alive():
            _end_group(child)
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()] if rows_path.exists() else []
    rows_path.unlink(missing_ok=True)
    if stopped:
        status = (f"stopped: over its budget of {budget_s:g} s after {time.monotonic() - started:.0f} s "
                  f"and {len(rows)} rows")
        say(f"  STOPPED {status}")
        rows.append({"check": name, "ok": None, "status": status})
    elif child.exitcode != 0 and not any(str(row.get("status", "")).startswith("error") for row in rows):
        rows.append({"check": name, "ok": False, "status": f"error: the section's process exited {child.exitcode}"})
    return rows


def _end_group(child) -> None:
    """SIGTERM to the child's process group (the section and any ``genolong`` it started), SIGKILL after
    :data:`GRACE_S`; the child alone where it has not made its group yet."""
    for sig, alone in ((signal.SIGTERM, child.terminate), (signal.SIGKILL, child.kill)):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            alone()
        child.join(GRACE_S)
        if not child.is_alive():
            return
    child.join()


def _child(name: str, section: Callable, plan, out: Path, rows_path: Path) -> None:
    """The child's whole job: run the section, each row appended to ``rows_path`` as it comes."""
    import logging

    os.setpgrp()  # one group: a stopped section takes its own children with it
    logging.getLogger("genolong").setLevel(logging.WARNING)

    def say(line: str) -> None:
        print(line, flush=True)

    with open(rows_path, "a") as handle:
        try:
            for row in section(plan, out, say):
                handle.write(json.dumps(row, default=str) + "\n")
                handle.flush()
        except Exception as err:  # a broken section is reported, and the others still run
            say(f"  ERROR {type(err).__name__}: {err}")
            handle.write(json.dumps({"check": name, "ok": False, "status": f"error: {type(err).__name__}: {err}"})
                         + "\n")
