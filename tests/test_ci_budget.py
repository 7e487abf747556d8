"""The CI step that fails a test run over its CPU-seconds budget (.ci/cpu_budget.py), with a planted slow test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET = REPO / ".ci" / "cpu_budget.py"


def run_budget(tmp_path, seconds: float, test_source: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(test_source)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_planted.py")]
    return subprocess.run([sys.executable, str(BUDGET), str(seconds), "--", *command],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


BURN = "import time\n\ndef test_burns_cpu():\n    end = time.process_time() + 1.5\n    while time.process_time() < end:\n        pass\n"


def test_a_planted_slow_test_fails_the_run_over_its_budget(tmp_path):
    result = run_budget(tmp_path, 1.0, BURN)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "OVER its budget of 1" in result.stdout.splitlines()[-1]


def test_a_run_within_its_budget_passes_and_says_so(tmp_path):
    result = run_budget(tmp_path, 60.0, BURN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "within its budget of 60" in result.stdout.splitlines()[-1]


def test_a_failing_run_keeps_its_own_exit_status(tmp_path):
    result = run_budget(tmp_path, 60.0, "def test_fails():\n    assert False\n")
    assert result.returncode == 1
