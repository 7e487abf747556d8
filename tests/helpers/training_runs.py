"""A micro pretraining run as the tests of training runs and of distributed launches write and start it."""

from __future__ import annotations

import torch
import yaml

from genolong.configs import preset_path
from genolong.resources import sample_genome

#: A micro pretraining run: 12 steps of 2 micro-batches of 2 windows, dropout on, BigBird
#: redrawing its random blocks every step (so every RNG must resume), checkpoints every 4 steps.
PRETRAIN = {
    "extends": str(preset_path("pretrain", "tiny")),
    "max_len": 128,
    "model": {"backbone": "bigbird", "block_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 64, "hidden_dropout_prob": 0.2,
              "attention_probs_dropout_prob": 0.1, "redraw_random_per_step": True},
    "corpus": {"passes": 2},
    "train": {"max_steps": 12, "batch_size": 2, "accumulate_grad_batches": 2, "warmup_steps": 2,
              "learning_rate": 0.003, "val_every_steps": 4, "val_windows": 4, "checkpoint_every_steps": 4,
              "log_every_steps": 1},
}


def write_config(path, data):
    path.write_text(yaml.safe_dump(data))
    return path


def pretrain_args(out, tokenizer, config, *extra):
    return ["pretrain", "--genome", str(sample_genome()), "--tokenizer", str(tokenizer), "--config", str(config),
            "--out", str(out), "--accelerator", "cpu", *extra]


def final_weights(out) -> dict[str, torch.Tensor]:
    return torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]


def assert_same_weights(a, b):
    first, second = final_weights(a), final_weights(b)
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), key
