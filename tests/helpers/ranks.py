"""A genolong command on two CPU ranks (gloo DDP), for the tests that compare it with one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_on_two_ranks(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``genolong ARGV`` (which asks for ``--devices 2``) in a fresh process on one thread per rank;
    Lightning launches the second rank. Returns its standard error, after checking that both ranks ran."""
    result = subprocess.run([sys.executable, "-m", "genolong.cli.main", *argv], capture_output=True, text=True,
                            timeout=600, cwd=cwd, env=os.environ | (env or {}) | {"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rank 1/2" in result.stderr
    return result.stderr
