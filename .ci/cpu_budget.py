"""Run a command and fail when it and every process it started used more CPU time than a budget.

usage: python .ci/cpu_budget.py SECONDS -- COMMAND [ARG ...]

The CPU time is user + system time of the command's whole process tree (every descendant that
finished and was waited for, as ``getrusage(RUSAGE_CHILDREN)`` counts it), so it does not depend on
how many cores the machine has or how busy it is, as wall time would. Exit status: the command's
own when it fails; 3 when it passed but went over the budget; 0 otherwise. One line is printed either way.
"""

from __future__ import annotations

import resource
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python .ci/cpu_budget.py SECONDS -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    budget = float(argv[0])
    status = subprocess.call(argv[2:])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = usage.ru_utime + usage.ru_stime
    verdict = "within" if used <= budget else "OVER"
    print(f"cpu budget: {' '.join(argv[2:])} used {used:.0f} CPU-seconds, {verdict} its budget of {budget:.0f}")
    if status != 0:
        return status
    return 0 if used <= budget else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
