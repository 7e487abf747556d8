"""Distributed faults: a rank that dies (SIGKILL to rank 1 of a two-process CPU run) stops the
others within seconds with one line, and the same command then resumes to the bytes of an
uninterrupted run; no rank waits forever in a collective."""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from genolong.core.errors import UserError
from genolong.runtime import ranks

#: The collective timeout in the multi-rank runs here (seconds): a hung rank is found quickly.
TIMEOUT_ENV = {ranks.TIMEOUT_VARIABLE: "60", "OMP_NUM_THREADS": "1", "SOURCE_DATE_EPOCH": "1795000000"}


def test_the_collective_timeout_is_stated_and_set_by_an_environment_variable(monkeypatch):
    monkeypatch.delenv(ranks.TIMEOUT_VARIABLE, raising=False)
    assert ranks.collective_timeout() == datetime.timedelta(seconds=600)
    strategy = ranks.strategy("auto", 2, 1)  # what Lightning's auto picks for two devices, with the timeout
    assert strategy._timeout == datetime.timedelta(seconds=600) and strategy._start_method == "popen"
    monkeypatch.setenv(ranks.TIMEOUT_VARIABLE, "2.5")
    assert ranks.strategy("ddp_find_unused_parameters_true", 1, 1)._timeout == datetime.timedelta(seconds=2.5)
    assert ranks.strategy("auto", 1, 1) == "auto" and ranks.strategy("single_device", 2, 1) == "single_device"
    for bad in ("0", "-3", "ten", "inf"):
        monkeypatch.setenv(ranks.TIMEOUT_VARIABLE, bad)
        with pytest.raises(UserError, match=f"{ranks.TIMEOUT_VARIABLE}={bad}: not a positive number"):
            ranks.collective_timeout()


#: Rank 0 of a Lightning launch in miniature: Lightning calls the observer of the launcher module with
#: the processes of ranks 1.. (rank 1 is killed at once, rank 2 would run for a minute).
LAUNCH = textwrap.dedent("""
    import subprocess, sys, time
    from lightning.pytorch.strategies.launchers import subprocess_script
    from genolong.runtime import ranks
    with ranks.watched("genolong test"):
        ranks.strategy("ddp", 3, 1)
        ranks.set_resume_hint("the finished parts are kept in X; the same command resumes")
        children = [subprocess.Popen([sys.executable, "-c", code]) for code in
                    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "import time; time.sleep(60)")]
        print(children[1].pid, time.monotonic(), flush=True)  # the clock is the system's: the test reads it
        subprocess_script._launch_process_observer(children)
        time.sleep(60)  # rank 0's work, or a collective that never returns
""")


def test_a_dead_rank_stops_rank_0_with_one_line_and_its_status():
    """Lightning's observer SIGKILLed every rank 5 s after one died, rank 0 included, without a word
    (exit 137 and no line); genolong's says which rank died, how, what is kept, within a second or two
    (timed from the launch of the ranks: starting Python and importing Lightning take long on a busy machine)."""
    proc = subprocess.run([sys.executable, "-c", LAUNCH], capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 128 + signal.SIGKILL, proc.stderr
    assert len(err) == 1 and err[0].startswith("genolong test: rank 1 (pid "), err
    assert err[0].endswith(") was killed by SIGKILL; the other ranks were stopped; the finished parts are kept in X; "
                           "the same command resumes"), err
    pid, launched = proc.stdout.split()
    assert time.monotonic() - float(launched) < 50, "the other rank's minute was not waited for"
    assert_ends_soon(int(pid))


def assert_ends_soon(pid: int) -> None:
    """The process ``pid`` (SIGKILLed) is gone or a zombie within 10 s."""
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), f"process {pid} still runs"


# -- the commands, on two CPU processes --------------------------------------------------------------------------
def _rank1(pid: int) -> int | None:
    """The process of rank 1 among the descendants of ``pid`` (Lightning starts it with LOCAL_RANK=1)."""
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            children = [int(c) for c in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
        except OSError:
            continue
        for child in children:
            try:
                if b"LOCAL_RANK=1" in Path(f"/proc/{child}/environ").read_bytes().split(b"\0"):
                    return child
            except OSError:
                continue
            todo.append(child)
    return None


def kill_rank_1_when(argv: list[str], cwd: Path, ready) -> tuple[int, list[str], float]:
    """Run ``genolong ARGV`` on two ranks, SIGKILL rank 1 once ``ready()`` holds; return the exit
    status, the standard error lines and the seconds from the kill to the end."""
    proc = subprocess.Popen([sys.executable, "-m", "genolong.cli.main", *argv], cwd=cwd, stderr=subprocess.PIPE, text=True,
                            env=os.environ | TIMEOUT_ENV, start_new_session=True)
    deadline, rank1 = time.monotonic() + 300, None
    while proc.poll() is None and time.monotonic() < deadline and (rank1 is None or not ready()):
        rank1 = rank1 or _rank1(proc.pid)
        time.sleep(0.05)
    assert proc.poll() is None and rank1 is not None, "the run ended before rank 1 could be killed"
    os.kill(rank1, signal.SIGKILL)
    killed = time.monotonic()
    err = proc.communicate(timeout=120)[1]
    return proc.returncode, err.strip().splitlines(), time.monotonic() - killed


def rerun(argv: list[str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "genolong.cli.main", *argv], cwd=cwd, capture_output=True, text=True,
                          env=os.environ | TIMEOUT_ENV, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def assert_one_line_about_rank_1(code: int, err: list[str], seconds: float, command: str, kept: str) -> None:
    assert code == 128 + signal.SIGKILL, err
    assert "Traceback" not in "\n".join(err), err
    assert err[-1].startswith(f"genolong {command}: rank 1 (pid ") and "was killed by SIGKILL" in err[-1], err
    assert kept in err[-1], err[-1]
    assert seconds < 30, f"rank 0 took {seconds:.0f} s to stop"


@pytest.mark.slow  # three fresh launches (two on two ranks) on the loaded 2-core machine: ~2 min
def test_a_scan_whose_rank_1_dies_stops_in_one_line_and_the_rerun_writes_the_bytes_of_one_process(tmp_path):
    from genolong.resources import sample_genome

    argv = ["scan", "--genome", str(sample_genome()), "--stride", "10", "--accelerator", "cpu", "--workers", "0",
            "--batch-size", "32"]
    (tmp_path / "one").mkdir()
    rerun([*argv, "--out", "o.bedGraph"], tmp_path / "one")
    two = [*argv, "--out", "o.bedGraph", "--devices", "2"]
    code, err, seconds = kill_rank_1_when(two, tmp_path, lambda: list(tmp_path.glob(".o.bedGraph.scan-*/*rank1of2*")))
    assert_one_line_about_rank_1(code, err, seconds, "scan", "the same command resumes (finished chromosomes are kept in")
    assert not (tmp_path / "o.bedGraph").exists() and list(tmp_path.glob(".o.bedGraph.scan-*"))
    rerun(two, tmp_path)
    assert (tmp_path / "o.bedGraph").read_bytes() == (tmp_path / "one" / "o.bedGraph").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.bedGraph", "one"]


@pytest.mark.slow  # three fresh launches (two on two ranks) on the loaded 2-core machine: ~2 min
def test_score_variants_whose_rank_1_dies_stops_in_one_line_and_the_rerun_resumes_to_the_same_bytes(tmp_path):
    from genolong.classifier.directory import default_promoter_model
    from genolong.dna.sequence import read_fasta
    from genolong.resources import sample_genome

    sequence = next(iter(read_fasta(sample_genome()))).sequence[20000:20400]
    vcf = tmp_path / "v.vcf"
    vcf.write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n" + "".join(
        f"chr17_part\t{20001 + i}\t.\t{base}\t{'C' if base != 'C' else 'G'}\t.\t.\t.\n" for i, base in enumerate(sequence)))
    argv = ["score-variants", "--vcf", str(vcf), "--genome", str(sample_genome()), "--model",
            str(default_promoter_model()), "--accelerator", "cpu", "--chunk-size", "16", "--batch-size", "8",
            "--out", "o.tsv"]
    (tmp_path / "one").mkdir()
    rerun(argv, tmp_path / "one")
    two = [*argv, "--devices", "2"]
    code, err, seconds = kill_rank_1_when(two, tmp_path, lambda: len(list(tmp_path.glob(".o.tsv.partial/part-*"))) >= 4)
    assert_one_line_about_rank_1(code, err, seconds, "score-variants", "the same command continues after the chunks kept in")
    assert not (tmp_path / "o.tsv").exists() and list((tmp_path / ".o.tsv.partial").glob("part-*"))
    assert "resuming with" in rerun(two, tmp_path)
    assert (tmp_path / "o.tsv").read_bytes() == (tmp_path / "one" / "o.tsv").read_bytes()


@pytest.mark.slow  # three launches of a two-rank pretraining run on the loaded 2-core machine: ~4 min
def test_pretrain_whose_rank_1_dies_stops_in_one_line_and_resumes_to_the_weights_of_an_uninterrupted_run(tmp_path):
    from helpers.training_runs import PRETRAIN, assert_same_weights, pretrain_args, write_config

    from genolong.dna.tokenizer import TokenizerTrainConfig, train_tokenizer
    from genolong.resources import sample_genome

    tokenizer = tmp_path / "tokenizer"
    train_tokenizer(sample_genome(), tokenizer, TokenizerTrainConfig(vocab_size=256, sample_bp=50_000),
                    show_progress=False)
    config = write_config(tmp_path / "micro.yaml", PRETRAIN)
    rerun([*pretrain_args(tmp_path / "straight", tokenizer, config), "--devices", "2"], tmp_path)
    run = tmp_path / "run"
    argv = [*pretrain_args(run, tokenizer, config), "--devices", "2"]
    code, err, seconds = kill_rank_1_when(argv, tmp_path, lambda: (run / "checkpoints" / "step4.ckpt").exists())
    assert_one_line_about_rank_1(code, err, seconds, "pretrain",
                                 f"the checkpoints in {run / 'checkpoints'} are kept; continue with --resume")
    assert not (run / "report.json").exists()
    rerun([*argv, "--resume"], tmp_path)
    assert_same_weights(run, tmp_path / "straight")


def start_two_rank_scan(cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A scan of the sample genome on two CPU ranks in its own session, returned once rank 1 has
    written its first part (or after 300 s); stderr is a pipe."""
    from genolong.resources import sample_genome

    argv = ["scan", "--genome", str(sample_genome()), "--stride", "10", "--accelerator", "cpu", "--workers", "0",
            "--batch-size", "32", "--out", "o.bedGraph", "--devices", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "genolong.cli.main", *argv], cwd=cwd, stderr=subprocess.PIPE,
                            text=True, env=os.environ | TIMEOUT_ENV | (env or {}), start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not list(cwd.glob(".o.bedGraph.scan-*/*rank1*")):
        time.sleep(0.05)
    return proc


@pytest.mark.slow  # two launches on two ranks and a 20-s timeout on the loaded 2-core machine: ~2 min
def test_a_hung_rank_ends_the_scan_after_the_collective_timeout_in_one_line(tmp_path):
    """A stopped rank (SIGSTOP: alive, never answering) left rank 0 waiting in the last barrier for
    Lightning's 30 minutes; with the collective timeout rank 0 stops after it, in one line."""
    proc = start_two_rank_scan(tmp_path, {ranks.TIMEOUT_VARIABLE: "20"})
    rank1 = _rank1(proc.pid)
    os.kill(rank1, signal.SIGSTOP)
    stopped = time.monotonic()
    err = proc.communicate(timeout=300)[1].strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in "\n".join(err), err
    assert err[-1].startswith("genolong scan: rank 0: no answer from another rank within 20 s"), err
    assert "the same command resumes" in err[-1] and time.monotonic() - stopped < 120
    assert_ends_soon(rank1)


@pytest.mark.slow  # a launch on two ranks on the loaded 2-core machine: ~40 s
def test_sigterm_to_the_process_group_of_a_two_rank_scan_is_143_and_one_line(tmp_path):
    """A signal to the whole group (timeout, SLURM, docker stop) reaches every rank: it is not a dead
    rank; each stops on it, and the command ends with 143 and the interrupt's line."""
    proc = start_two_rank_scan(tmp_path)
    os.killpg(proc.pid, signal.SIGTERM)
    err = proc.communicate(timeout=120)[1].strip().splitlines()
    assert proc.returncode == 143 and "Traceback" not in "\n".join(err), err
    assert err[-1].startswith("genolong scan: interrupted; the same command resumes"), err
    assert not any("rank 1 (pid" in line for line in err), err


@pytest.mark.slow  # a launch on two ranks on the loaded 2-core machine: ~1 min
def test_rank_1_ends_in_one_line_when_rank_0_dies(tmp_path):
    """With rank 0 (the launcher's process) SIGKILLed, rank 1 ended in a gloo traceback at its next
    collective; now in one line saying that another rank has ended and what is kept."""
    proc = start_two_rank_scan(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    err = proc.stderr.read().strip().splitlines()  # until rank 1, which shares the pipe, has ended too
    assert "Traceback" not in "\n".join(err) and time.monotonic() - killed < 120, err
    assert err[-1].startswith("genolong scan: rank 1: another rank of the run has ended (its connection closed); "
                              "the same command resumes"), err
