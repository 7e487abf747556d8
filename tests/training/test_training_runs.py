"""Lightning runs as a user drives them through the CLI: interrupted (SIGINT, SIGTERM, mid
accumulation cycle, mid epoch) and resumed to bit-identical weights, smoke runs shorter than the
validation interval, bad trainer and device options, damaged or hostile checkpoints."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from helpers.classify import promoter_dataset
from helpers.training_runs import PRETRAIN, assert_same_weights, pretrain_args, write_config

from genolong.cli.main import main
from genolong.configs import preset_path
from genolong.dna.tokenizer import TokenizerTrainConfig, train_tokenizer
from genolong.resources import sample_genome
from genolong.training.stopping import StopOnSignal

#: A micro promoter fine-tuning run on top of the ``promoter_tiny`` preset.
FINETUNE = {
    "extends": str(preset_path("finetune", "promoter_tiny")),
    "max_len": 64,
    "model": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
              "hidden_dropout_prob": 0.2},
    "patience": 5,
    "kmer_baseline": False,
    "train": {"max_steps": 8, "batch_size": 8, "accumulate_grad_batches": 2, "warmup_steps": 1,
              "val_every_steps": 3, "val_windows": 32, "checkpoint_every_steps": 3, "log_every_steps": 1},
}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokenizer") / "tokenizer"
    train_tokenizer(sample_genome(), out, TokenizerTrainConfig(vocab_size=256, sample_bp=50_000),
                    show_progress=False)
    return out


@pytest.fixture(scope="module")
def pretrain_config(tmp_path_factory):
    return write_config(tmp_path_factory.mktemp("configs") / "micro.yaml", PRETRAIN)


@pytest.fixture(scope="module")
def straight_pretrain(tokenizer, pretrain_config, tmp_path_factory):
    """An uninterrupted run: its final weights are the reference."""
    out = tmp_path_factory.mktemp("straight") / "run"
    assert main(pretrain_args(out, tokenizer, pretrain_config)) == 0
    return out


def run_from_its_checkpoint(run, out, name):
    """A new run directory ``out`` with ``run``'s identity and only its step-4 checkpoint, as ``name``."""
    (out / "checkpoints").mkdir(parents=True)
    for marker in ("run.json", ".genolong-run.json"):
        (out / marker).write_bytes((run / marker).read_bytes())
    (out / "checkpoints" / name).write_bytes((run / "checkpoints" / "step4.ckpt").read_bytes())
    return out


def hidden_temporaries(out) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob(".*") if p.name.endswith(".tmp"))


@pytest.fixture
def signal_at_batch(monkeypatch):
    """``signal_at_batch(signum, n, times=1)``: the process sends itself ``signum`` (``times`` times)
    as the ``n``-th training micro-batch (0-based) of the next run starts: a Ctrl-C or ``kill`` at
    a known point. Returns a function that disarms it."""

    def arm(signum: int, batch: int, times: int = 1):
        original = StopOnSignal.on_train_batch_start
        seen = []

        def start(self, trainer, *args):
            original(self, trainer, *args)
            if len(seen) == batch:
                for _ in range(times):
                    os.kill(os.getpid(), signum)
            seen.append(batch)

        monkeypatch.setattr(StopOnSignal, "on_train_batch_start", start)
        return lambda: monkeypatch.setattr(StopOnSignal, "on_train_batch_start", original)

    return arm


@pytest.mark.parametrize("batch, stops_at", [(4, 3), (9, 5), (22, 12)],
                         ids=["mid-cycle", "mid-cycle-before-validation", "last-step"])
def test_pretrain_interrupted_mid_cycle_resumes_to_identical_weights(
        tokenizer, pretrain_config, straight_pretrain, tmp_path, capsys, signal_at_batch, batch, stops_at):
    """Micro-batch 4 is the first of step 3's cycle (no validation after it); 9 the second of step 5's,
    whose validation (step 4's) has run; 22 the first of the last step's: the run finishes the cycle
    (and the validation after it), saves, and stops."""
    out = tmp_path / "run"
    disarm = signal_at_batch(signal.SIGINT, batch)
    assert main(pretrain_args(out, tokenizer, pretrain_config)) == 130
    disarm()
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1] == f"genolong pretrain: stopped at step {stops_at}; continue with --resume"
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == stops_at
    assert not (out / "model").exists() and not hidden_temporaries(out)
    assert main(pretrain_args(out, tokenizer, pretrain_config, "--resume")) == 0
    assert_same_weights(out, straight_pretrain)
    reports = [json.loads((run / "report.json").read_text()) for run in (out, straight_pretrain)]
    assert reports[0]["val_loss"] == reports[1]["val_loss"]


def test_a_second_signal_stops_at_once_and_resume_uses_the_last_checkpoint(
        tokenizer, pretrain_config, straight_pretrain, tmp_path, capsys, signal_at_batch):
    """Two Ctrl-C at micro-batch 11 (step 6): no waiting for the step's end, no new checkpoint;
    --resume continues from the periodic checkpoint of step 4 to the same weights."""
    out = tmp_path / "run"
    disarm = signal_at_batch(signal.SIGINT, 11, times=2)
    assert main(pretrain_args(out, tokenizer, pretrain_config)) == 130
    disarm()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "genolong pretrain: stopped at once, without a checkpoint; --resume continues from step 4"
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
    assert not hidden_temporaries(out)
    assert main(pretrain_args(out, tokenizer, pretrain_config, "--resume")) == 0
    assert_same_weights(out, straight_pretrain)


def test_pretrain_interrupted_in_its_final_validation(tokenizer, pretrain_config, straight_pretrain, tmp_path,
                                                     capsys, monkeypatch):
    """SIGINT inside Lightning's final ``validate`` (where a KeyboardInterrupt would become exit 1):
    exit 130 and the CLI's line; --resume only validates and writes the model and report. The
    validation cadence does not change the weights, so the uninterrupted run is still the reference."""
    from genolong.training.pretrain import MLMModule

    original = MLMModule.validation_step

    def interrupted(self, batch, batch_idx):
        if self.trainer.state.fn == "validate":
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, batch, batch_idx)

    monkeypatch.setattr(MLMModule, "validation_step", interrupted)
    out = tmp_path / "run"
    # validations at steps 5 and 10: the last step (12) has none, so the final validate runs
    off_cadence = ("--set", "train.val_every_steps=5")
    assert main(pretrain_args(out, tokenizer, pretrain_config, *off_cadence)) == 130
    monkeypatch.undo()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "genolong pretrain: stopped after the last step (12); continue with --resume"
    assert not (out / "model").exists() and not (out / "report.json").exists() and not hidden_temporaries(out)
    assert main(pretrain_args(out, tokenizer, pretrain_config, *off_cadence, "--resume")) == 0
    assert_same_weights(out, straight_pretrain)
    reports = [json.loads((run / "report.json").read_text()) for run in (out, straight_pretrain)]
    assert reports[0]["val_loss"] == reports[1]["val_loss"]


def test_pretrain_resumed_from_a_periodic_checkpoint_of_a_clean_run(tokenizer, pretrain_config,
                                                                   straight_pretrain, tmp_path):
    """A clean run's own step-4 checkpoint, resumed, reaches the clean run's weights."""
    out = run_from_its_checkpoint(straight_pretrain, tmp_path / "run", "last.ckpt")
    assert main(pretrain_args(out, tokenizer, pretrain_config, "--resume")) == 0
    assert_same_weights(out, straight_pretrain)


@pytest.mark.slow  # ~25 s: a fresh interpreter and DataLoader workers; the in-process variants above are fast
def test_pretrain_sigterm_to_the_process_group_stops_with_a_checkpoint_and_resumes(tokenizer, straight_pretrain,
                                                                                   tmp_path):
    """SIGTERM to the process group (a batch scheduler, ``docker stop``; a terminal's Ctrl-C also
    reaches every process of the group) of a run with DataLoader workers: exit 143 and the CLI's
    line, ``last.ckpt`` at the step it names, no temporary files; --resume finishes the run with
    the weights of an uninterrupted run without workers."""
    config = write_config(tmp_path / "workers.yaml", PRETRAIN | {"train": PRETRAIN["train"] | {"num_workers": 1}})
    out = tmp_path / "run"
    # The reference ran in this process: the same number of threads gives the same floating-point sums.
    env = os.environ | {"OMP_NUM_THREADS": str(torch.get_num_threads())}
    args = [sys.executable, "-m", "genolong.cli.main", *pretrain_args(out, tokenizer, config)]
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 120
    while not (out / "checkpoints" / "step4.ckpt").exists() and process.poll() is None:
        assert time.monotonic() < deadline, "the run never reached step 4"
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    # 8 steps and 2 validations remain after step 4's checkpoint: a run that ends with 0 ignored the signal
    assert process.returncode == 143, err[-2000:]
    last_line = err.strip().splitlines()[-1]
    assert last_line.startswith("genolong pretrain: stopped at step ") and "Traceback" not in err
    assert err.count("stopping at the end of this step") == 1, "the workers leave the signal to the main process"
    step = int(last_line.split("step ")[1].split(";")[0])
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == step
    assert not hidden_temporaries(out)
    assert main(pretrain_args(out, tokenizer, config, "--resume")) == 0
    assert_same_weights(out, straight_pretrain)


# -- fine-tuning --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def promoters(real_data, tmp_path_factory):
    return promoter_dataset(real_data, tmp_path_factory.mktemp("promoters") / "data")


def finetune_args(out, data, tokenizer, config, *extra):
    return ["promoter", "finetune", "--data", str(data), "--tokenizer", str(tokenizer), "--config", str(config),
            "--out", str(out), "--accelerator", "cpu", *extra]


def test_finetune_sigterm_mid_cycle_resumes_to_identical_weights(promoters, tokenizer, tmp_path, capsys,
                                                                signal_at_batch):
    """SIGTERM at micro-batch 6, the first of step 4's cycle, after the validation of step 3: the run
    stops after step 4 with exit 143; resumed, early stopping and the best checkpoint are those of an
    uninterrupted run."""
    config = write_config(tmp_path / "micro.yaml", FINETUNE)
    straight, out = tmp_path / "straight", tmp_path / "run"
    assert main(finetune_args(straight, promoters, tokenizer, config)) == 0
    disarm = signal_at_batch(signal.SIGTERM, 6)
    assert main(finetune_args(out, promoters, tokenizer, config)) == 143
    disarm()
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1] == "genolong promoter finetune: stopped at step 4; continue with --resume"
    assert not (out / "model").exists() and not hidden_temporaries(out)
    assert main(finetune_args(out, promoters, tokenizer, config, "--resume")) == 0
    assert_same_weights(out, straight)
    reports = [json.loads((run / "report.json").read_text()) for run in (out, straight)]
    assert reports[0]["best_step"] == reports[1]["best_step"] and reports[0]["test"] == reports[1]["test"]


def test_finetune_interrupted_in_its_evaluation_after_early_stopping(promoters, tokenizer, tmp_path, capsys,
                                                                    monkeypatch):
    """SIGTERM while the test split is scored, after early stopping: exit 143, no model, no report;
    --resume, after the run directory was moved, does not train on (the early-stopping decision and
    the best checkpoint are in the checkpoint) and writes the uninterrupted run's report."""
    from genolong.tasks.promoter import PromoterTask

    data = FINETUNE | {"patience": 1, "train": FINETUNE["train"] | {"val_every_steps": 1, "max_steps": 30}}
    config, straight, out = write_config(tmp_path / "micro.yaml", data), tmp_path / "straight", tmp_path / "run"
    assert main(finetune_args(straight, promoters, tokenizer, config)) == 0
    expected = json.loads((straight / "report.json").read_text())
    assert expected["early_stopped"] and expected["steps"] < 30

    def killed_while_scoring(*args):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the signal did not stop the run")

    monkeypatch.setattr(PromoterTask, "test_report", killed_while_scoring)
    assert main(finetune_args(out, promoters, tokenizer, config)) == 143
    monkeypatch.undo()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"genolong promoter finetune: stopped after the last step ({expected['steps']}); continue with --resume"
    assert not (out / "model").exists() and not (out / "report.json").exists() and not hidden_temporaries(out)
    moved = tmp_path / "moved"  # the run directory moved before --resume: its checkpoints move with it
    out.rename(moved)
    assert main(finetune_args(moved, promoters, tokenizer, config, "--resume")) == 0
    report = json.loads((moved / "report.json").read_text())
    assert {k: v for k, v in report.items() if k != "seconds"} == {k: v for k, v in expected.items() if k != "seconds"}


def test_finetune_smoke_run_shorter_than_the_validation_interval(promoters, tokenizer, tmp_path, caplog):
    """``--max-steps 2`` with the preset's validation every 100 steps: validated once, at the end."""
    caplog.set_level(logging.INFO, logger="genolong")
    config = write_config(tmp_path / "micro.yaml", FINETUNE | {"train": FINETUNE["train"] | {"val_every_steps": 100}})
    out = tmp_path / "run"
    assert main(finetune_args(out, promoters, tokenizer, config, "--max-steps", "2")) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 2 and report["best_step"] == 2
    assert "validating at the end of the run: max_steps=2 is below val_every_steps=100" in caplog.text


def test_pretrain_smoke_run_shorter_than_the_validation_interval(tokenizer, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="genolong")
    data = PRETRAIN | {"train": PRETRAIN["train"] | {"val_every_steps": 100, "checkpoint_every_steps": 100}}
    out = tmp_path / "run"
    assert main(pretrain_args(out, tokenizer, write_config(tmp_path / "micro.yaml", data), "--max-steps", "2")) == 0
    assert json.loads((out / "report.json").read_text())["steps"] == 2
    assert "validating at the end of the run" in caplog.text


# -- checkpoints --------------------------------------------------------------------------------
class Payload:
    """Unpickling it would run a command: what a hostile ``last.ckpt`` could hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_damaged_or_hostile_last_checkpoint_is_refused_in_one_line(tokenizer, pretrain_config, straight_pretrain,
                                                                  tmp_path, capsys):
    out = run_from_its_checkpoint(straight_pretrain, tmp_path / "run", "step4.ckpt")
    step4 = (out / "checkpoints" / "step4.ckpt").read_bytes()
    last = out / "checkpoints" / "last.ckpt"

    last.write_bytes(step4[: len(step4) // 2])  # truncated: a full disk, a copy cut short
    assert main(pretrain_args(out, tokenizer, pretrain_config, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{last}: not a readable checkpoint (truncated or damaged" in err
    assert f"copy {out / 'checkpoints' / 'step4.ckpt'} over it to resume from step 4" in err

    marker = tmp_path / "code-ran"
    torch.save({"state_dict": {}, "payload": Payload(marker)}, last)
    assert main(pretrain_args(out, tokenizer, pretrain_config, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{last}: refused to load: it holds posix.system" in err
    assert not marker.exists()
    assert last.read_bytes() != step4 and not (out / "model").exists()


def test_the_console_shows_one_bar_and_genolong_lines(tokenizer, tmp_path, capsys, caplog, recwarn):
    """A run and its resumption print one bar over optimizer steps with loss, throughput and
    validation, and genolong's log lines: no model-summary table, no ``Epoch 0/-2 ... v_num``,
    no Lightning hardware or tip lines, no warnings about resuming mid epoch."""
    caplog.set_level(logging.INFO, logger="genolong")
    data = PRETRAIN | {"train": PRETRAIN["train"] | {"checkpoint_every_steps": 1, "val_every_steps": 2}}
    config, out = write_config(tmp_path / "micro.yaml", data), tmp_path / "run"
    assert main(pretrain_args(out, tokenizer, config, "--max-steps", "3")) == 0
    assert main(pretrain_args(out, tokenizer, config, "--max-steps", "4", "--resume")) == 0
    shown = capsys.readouterr()
    for noise in ("Epoch", "v_num", "FLOPs", "┃", "Params", "INFO: ", "Tip", "GPU available", "weights_only"):
        assert noise not in shown.out + shown.err, noise
    assert "training: 100%" in shown.err and "4/4 [" in shown.err
    assert "loss=" in shown.err and "tokens/s=" in shown.err and "val bits/bp=" in shown.err
    assert "training GenolongForMaskedLM (" in caplog.text and "steps 4 to 4" in caplog.text
    assert [str(w.message) for w in recwarn] == []
