"""Benchmark suites for the tests of `genolong benchmark`: a micro model, a suite file, a refused run."""

from __future__ import annotations

import yaml

from genolong.cli.main import main


def micro_model(**model) -> dict:
    return {"name": "micro", "source": "scratch:full", "finetune": {
        "max_len": 260, "model": {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                                  "intermediate_size": 32, "pre_layer_norm": True, **model},
        "tokenizer": {"vocab_size": 22, "sample_bp": 20000},
        "train": {"max_steps": 4, "val_every_steps": 2, "batch_size": 8, "warmup_steps": 1, "log_every_steps": 1,
                  "learning_rate": 0.003, "checkpoint_every_steps": 100, "val_windows": 100}}}


def write_suite(path, tasks: list[dict], **changes) -> str:
    path.write_text(yaml.safe_dump({"tasks": tasks, "models": [micro_model()], "seeds": [0], **changes}))
    return str(path)


def refused(argv, capsys) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]
