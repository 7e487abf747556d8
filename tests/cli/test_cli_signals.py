"""SIGINT and SIGTERM (genolong/core/interrupts.py): both unwind through ``atomic_path``, so no
temporary file stays, and the CLI exits with 128 + the signal number and one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from genolong.cli.commands import tokenizer as tokenizer_command
from genolong.cli.main import main
from genolong.core import interrupts
from genolong.core.files import atomic_path

REPO = Path(__file__).resolve().parents[2]


def test_sigterm_raises_an_interrupt_carrying_its_number_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(interrupts.SignalInterrupt) as caught, interrupts.handled():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
    assert isinstance(caught.value, KeyboardInterrupt)
    assert (caught.value.signum, caught.value.exit_code) == (signal.SIGTERM, 143)
    assert str(caught.value) == "interrupted by SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_does_not_cut_the_clean_up_short(tmp_path):
    with pytest.raises(interrupts.SignalInterrupt), interrupts.handled():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # ignored: the clean-up below still runs
            (tmp_path / "cleaned").write_text("yes")
    assert (tmp_path / "cleaned").exists() and interrupts.last_signal() == signal.SIGTERM


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_removes_temporary_files_and_exits_128_plus_the_signal(monkeypatch, tmp_path, capsys, signum, code):
    out = tmp_path / "report.json"

    def interrupted_while_writing(args) -> int:
        with atomic_path(out) as tmp:
            tmp.write_text("half")
            os.kill(os.getpid(), signum)
            time.sleep(5)
        return 0

    monkeypatch.setattr(tokenizer_command, "run_stats", interrupted_while_writing)
    assert main(["tokenizer", "stats", "--tokenizer", str(tmp_path), "--genome", str(tmp_path / "g.fa"),
                 "--json", str(out)]) == code
    err = capsys.readouterr().err
    assert err == f"genolong tokenizer stats: interrupted by {signal.Signals(signum).name}\n"
    assert list(tmp_path.iterdir()) == []


def test_code_that_saved_its_state_ends_the_command_with_its_own_line(monkeypatch, tmp_path, capsys):
    """The training loop's pattern: catch the interrupt, save, then stop() with the resume hint."""

    def training(args) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            interrupts.stop("stopped at step 3; continue with --resume")
        return 0

    monkeypatch.setattr(tokenizer_command, "run_stats", training)
    assert main(["tokenizer", "stats", "--tokenizer", str(tmp_path), "--genome", str(tmp_path / "g.fa")]) == 143
    assert capsys.readouterr().err == "genolong tokenizer stats: stopped at step 3; continue with --resume\n"


def _temporary_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143),
                                          pytest.param(signal.SIGINT, 130, marks=pytest.mark.slow)])
def test_a_signal_to_a_running_prediction_leaves_no_partial_file(tmp_path, signum, code):
    """`genolong predict-promoter` reading a pipe that delivers one record and then waits (its
    output file is open under a temporary name): the signal the user, ``timeout`` or a
    scheduler sends ends it."""
    fifo = tmp_path / "input.fa"
    os.mkfifo(fifo)
    out = tmp_path / "predictions.tsv"
    done = threading.Event()

    def slow_writer() -> None:
        with open(fifo, "w") as pipe:  # blocks until genolong opens the pipe
            pipe.write(">r1\n" + "ACGT" * 500 + "\n")
            pipe.flush()
            done.wait(240)

    threading.Thread(target=slow_writer, daemon=True).start()
    process = subprocess.Popen(
        [sys.executable, "-m", "genolong.cli.main", "predict-promoter", str(fifo), "--out", str(out)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 180
    while not _temporary_files(tmp_path) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _temporary_files(tmp_path), process.communicate() if process.poll() is not None else "timed out"
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    done.set()
    assert process.returncode == code
    assert err.strip().splitlines()[-1] == f"genolong predict-promoter: interrupted by {signal.Signals(signum).name}"
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.fa"]


def test_an_interrupt_between_the_renames_of_a_directory_keeps_the_old_one(monkeypatch, tmp_path):
    """Replacing a directory takes two renames (old aside, new in); a signal between them must
    not leave the destination missing."""
    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("old")
    rename = Path.rename

    def interrupted_after_the_first(self, destination):
        result = rename(self, destination)
        if Path(destination).name == ".model.old":
            raise interrupts.SignalInterrupt(signal.SIGTERM)
        return result

    monkeypatch.setattr(Path, "rename", interrupted_after_the_first)
    with pytest.raises(interrupts.SignalInterrupt), atomic_path(target, directory=True) as tmp:
        (tmp / "weights").write_text("new")
    assert (target / "weights").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
