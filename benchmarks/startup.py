"""Start-up time of the command line: ``genolong --version``, ``--help``, every command's ``--help`` and an
argument error, each a fresh process, median of ``--runs`` runs (wall-clock and CPU seconds, user + system:
the CPU time is what a busy machine stretches least).

``--baseline-python`` also times another installation (e.g. the virtual environment of another
checkout) in the same run, interleaved, on ``--version``, ``--help`` and the argument error, for a
before/after table::

    python benchmarks/startup.py [--runs 5] [--baseline-python ../main/.venv/bin/python] [--out table.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

#: The children's working directory: not a checkout, so that ``-m genolong.cli.main`` imports the installed genolong.
NEUTRAL = tempfile.gettempdir()


def commands() -> list[list[str]]:
    """Every parser's ``--help`` (groups and their sub-commands), ``--version`` and one argument error."""
    from genolong.cli.main import build_parser

    found = [["--version"], ["--help"]]

    def walk(parser, words):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    found.append([*words, name, "--help"])
                    walk(sub, [*words, name])

    walk(build_parser(), [])
    return [*found, ["scan", "--stride", "0"]]


def timed(python: str, argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of ``python -m genolong.cli.main ARGV``."""
    start = time.perf_counter()
    process = subprocess.Popen([python, "-m", "genolong.cli.main", *argv], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=NEUTRAL)  # each interpreter's own genolong
    _, _, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per command (default: 5)")
    parser.add_argument("--baseline-python", default=None, help="also time this interpreter's genolong")
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown table here")
    args = parser.parse_args()
    pythons = {"this": sys.executable} | ({"baseline": args.baseline_python} if args.baseline_python else {})
    header = ["command"] + [f"{name}_{what}" for name in pythons for what in ("wall_s", "cpu_s")]
    rows = []
    every = commands()
    compared = [every[0], every[1], every[-1]]  # --version, --help, the argument error
    for argv in every:
        times = {name: [] for name in pythons if name == "this" or argv in compared}
        for _ in range(args.runs):  # interleaved: load changes hit both alike
            for name in times:
                times[name].append(timed(pythons[name], argv))
        cells = []
        for name in pythons:
            cells += ([f"{statistics.median(t[0] for t in times[name]):.2f}",
                       f"{statistics.median(t[1] for t in times[name]):.2f}"] if name in times else ["", ""])
        rows.append([f"`genolong {' '.join(argv)}`", *cells])
        print(" | ".join(rows[-1]), flush=True)
    load = os.getloadavg()[0]
    table = "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                       *("| " + " | ".join(row) + " |" for row in rows)])
    note = (f"{date.today()}, {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f} (1 min) at the "
            f"end, median of {args.runs} runs; command: python benchmarks/startup.py --runs {args.runs}"
            + (" --baseline-python PYTHON" if args.baseline_python else ""))
    print(f"\n{table}\n\n{note}")
    if args.out:
        args.out.write_text(f"{table}\n\n{note}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
