"""What a user sees on the terminal during ``genolong pretrain`` and ``genolong promoter finetune``:
one progress bar (steps done / total, loss, throughput, ETA) and genolong's own lines; Lightning's
epoch bar, logger version, FLOPs, model-summary table, tips and dependency warnings only with ``-v``."""

from __future__ import annotations

import logging

import pytest
import yaml
from helpers.classify import promoter_dataset

from genolong.cli.main import main
from genolong.configs import preset_path
from genolong.dna.tokenizer import TokenizerTrainConfig, train_tokenizer
from genolong.resources import sample_genome

MODEL = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
PRETRAIN = {
    "extends": str(preset_path("pretrain", "tiny")),
    "max_len": 64,
    "model": {"backbone": "full", **MODEL},
    "corpus": {"passes": 1},
    "train": {"max_steps": 3, "batch_size": 2, "warmup_steps": 1, "val_every_steps": 3, "val_windows": 2,
              "checkpoint_every_steps": 3, "log_every_steps": 1},
}
FINETUNE = {
    "extends": str(preset_path("finetune", "promoter_tiny")),
    "max_len": 64,
    "model": MODEL,
    "kmer_baseline": False,
    "train": {"max_steps": 3, "batch_size": 8, "warmup_steps": 1, "val_every_steps": 3, "val_windows": 16,
              "checkpoint_every_steps": 3, "log_every_steps": 1},
}
#: What Lightning, transformers and the dependencies print by default, and genolong must not.
NOISE = ("Epoch", "v_num", "FLOPs", "┃", "Params", "Mode", "GPU available", "TPU available", "Tip",
         "LOAD REPORT", "Some weights", "deprecated", "Warning", "`Trainer.fit` stopped")


@pytest.fixture(scope="module")
def inputs(real_data, tmp_path_factory):
    """A micro tokenizer, a promoter dataset and the two run configs."""
    work = tmp_path_factory.mktemp("console")
    tokenizer = work / "tokenizer"
    train_tokenizer(sample_genome(), tokenizer, TokenizerTrainConfig(vocab_size=128, sample_bp=20_000),
                    show_progress=False)
    for name, config in (("pretrain.yaml", PRETRAIN), ("finetune.yaml", FINETUNE)):
        (work / name).write_text(yaml.safe_dump(config))
    return {"tokenizer": tokenizer, "data": promoter_dataset(real_data, work / "promoters"), "work": work}


def _run_both(inputs, out, *options) -> None:
    """A micro pretraining, then a promoter fine-tuning of its model, through the CLI."""
    work = inputs["work"]
    assert main([*options, "pretrain", "--genome", str(sample_genome()), "--tokenizer", str(inputs["tokenizer"]),
                 "--config", str(work / "pretrain.yaml"), "--out", str(out / "pretrain"), "--accelerator", "cpu"]) == 0
    assert main([*options, "promoter", "finetune", "--data", str(inputs["data"]), "--model",
                 str(out / "pretrain" / "model"), "--config", str(work / "finetune.yaml"), "--out",
                 str(out / "finetune"), "--accelerator", "cpu"]) == 0


def test_a_run_shows_one_bar_and_genolong_lines_only(inputs, tmp_path, capfd, caplog, recwarn):
    caplog.set_level(logging.DEBUG)
    _run_both(inputs, tmp_path)
    out, err = capfd.readouterr()
    shown = out + err + caplog.text
    for noise in NOISE:
        assert noise not in shown, noise
    assert [str(warning.message) for warning in recwarn] == []
    bars = err.replace("\r", "\n")
    assert "training: 100%" in bars and "3/3 [" in bars  # steps done / total, elapsed<ETA
    assert "loss=" in bars and "tokens/s=" in bars and "val bits/bp=" in bars and "val F1=" in bars
    assert "training GenolongForMaskedLM (" in caplog.text
    assert "training GenolongForSequenceClassification (" in caplog.text
    assert "validation: loss" in out and "genolong full test" in out  # the commands' summaries
    assert not [record for record in caplog.records if not record.name.startswith("genolong")]


def test_verbose_brings_lightning_lines_back(inputs, tmp_path, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    _run_both(inputs, tmp_path, "-v")
    lightning = [record.getMessage() for record in caplog.records if record.name.startswith("lightning")]
    assert sum("GPU available" in line for line in lightning) == 2  # one per run
    assert sum("`Trainer.fit` stopped" in line for line in lightning) == 2
    assert "training: 100%" in capfd.readouterr().err.replace("\r", "\n")
