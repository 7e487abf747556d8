"""A micro fine-tuning preset and motif-labelled sequences that a model learns in a few steps."""

from __future__ import annotations

import numpy as np
import yaml

BASES = np.array(list("ACGT"))


MOTIFS = ["GGGCGGGG", "TATAAAAG", "CACGTGAC"]


def motif_rows(count: int, length: int, seed: int) -> list[tuple[str, int]]:
    """Random sequences each holding the motif of its class (0, 1, 2, in turn) at a random place."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        label = i % 3
        sequence = "".join(BASES[rng.integers(0, 4, length)])
        at = int(rng.integers(0, length - 8))
        rows.append((sequence[:at] + MOTIFS[label] + sequence[at + 8:], label))
    return rows


def micro_preset(path, **train):
    path.write_text(yaml.safe_dump({
        "task": "labelled", "max_len": 72,
        "model": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
                  "pre_layer_norm": True, "hidden_dropout_prob": 0.0},
        "tokenizer": {"vocab_size": 22, "sample_bp": 20_000}, "patience": 10, "batch_size_eval": 64,
        "train": {"max_steps": 20, "val_every_steps": 10, "batch_size": 16, "learning_rate": 0.003, "warmup_steps": 2,
                  "log_every_steps": 5, "checkpoint_every_steps": 20, "val_windows": 1000, **train},
    }))
    return path
