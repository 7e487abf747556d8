"""A synthetic long-range task: the label needs two motifs farther apart than a SLED chunk.

Every example is ``[CLS]`` followed by random background tokens, with two motifs planted: one in
the first part of the sequence and one in the last part, always more than ``--min-distance``
tokens apart (96 by default, three times the SLED chunk of 32, so no chunk sees both motifs).
Each motif is of kind A or B, a fixed run of ``MOTIF_LENGTH`` tokens that the background never
contains. The label is the number of A motifs, 0, 1 or 2 (classes of 25%, 50%, 25%): a model
that sees one motif can do no better than always answering 1 (50%), so accuracy above 50% means
evidence from both ends of the sequence was combined.

What it measures, and what not: motif *recognition* is easy here (dedicated tokens); the test is
whether information crosses the distance. The label is additive in the two motifs, so mean
pooling suffices to fuse them; a label that needs an interaction of the two (same kind or not)
did not train within a CPU budget for any backbone, full attention included.

Each backbone (same size, steps, seed and training examples, fresh examples every step) is
trained as a ``GenolongForSequenceClassification`` and its accuracy measured on a fixed
held-out set. The ``sled-cls`` row is SLED without fusion (the first chunk's [CLS] only, so a
truncated model): it should stay at 50%, which checks that the task really is long-range.

Run (CPU; a few minutes per backbone on 2 free cores, more under load)::

    python benchmarks/long_range_task.py
    python benchmarks/long_range_task.py --backbones full sled --steps 300
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from genolong.model.modeling import GenolongConfig, GenolongForSequenceClassification

NUM_SPECIAL = 5  # [PAD] [UNK] [CLS] [SEP] [MASK], as genolong's tokenizers
CLS = 2
BACKGROUND = 16  # background tokens: ids NUM_SPECIAL .. NUM_SPECIAL + BACKGROUND - 1
MOTIF_LENGTH = 4
#: Motif A and motif B, (2, MOTIF_LENGTH) ids after the background's.
MOTIFS = NUM_SPECIAL + BACKGROUND + np.arange(2 * MOTIF_LENGTH).reshape(2, MOTIF_LENGTH)
VOCAB_SIZE = NUM_SPECIAL + BACKGROUND + 2 * MOTIF_LENGTH
CHUNK = 32  # the SLED chunk c; --min-distance must exceed it

#: Each backbone's parameters for the task's short sequences: the papers' patterns scaled down
#: so that they stay sparse (a minority of the keys per query) at 256 tokens.
BACKBONES: dict[str, dict] = {
    "full": {},
    "bigbird": {"block_size": 16},  # 2 global + 3 window + 3 random of 16 blocks
    "longformer": {"attention_window": 32},
    "lsg": {"block_size": 16, "sparse_block_size": 16},
    # r = 1 + 4 * 8 + 28 = 61 rows of 256 in the compressed layer
    "vcc": {
        "pre_layer_norm": True,
        "vcc_block_size": 8,
        "vcc_fine_blocks": 4,
        "vcc_warmup_layers": 1,
        "vcc_warmup_window": 32,
    },
    "sled": {"sled_chunk_size": CHUNK, "sled_context_padding": 0.5, "sled_fusion": "attention"},
    "sled-cls": {"sled_chunk_size": CHUNK, "sled_context_padding": 0.5, "sled_fusion": "cls"},
}


def make_examples(count: int, length: int, min_distance: int, rng: np.random.Generator):
    """``count`` examples: ids (count, length) int64 and labels (count,) int64 in {0, 1, 2}.

    Motif 1 starts in ``[1, first_end)`` and motif 2 in ``[first_end + min_distance, length -
    MOTIF_LENGTH]``, where ``first_end = (length - min_distance) // 2``.
    """
    ids = NUM_SPECIAL + rng.integers(0, BACKGROUND, size=(count, length))
    ids[:, 0] = CLS
    first_end = (length - min_distance) // 2
    kind = rng.integers(0, 2, size=(count, 2))  # 0 = A, 1 = B
    start = np.stack(
        [
            rng.integers(1, first_end, size=count),
            rng.integers(first_end + min_distance, length - MOTIF_LENGTH + 1, size=count),
        ],
        axis=1,
    )
    rows = np.arange(count)[:, None]
    for slot in range(2):
        ids[rows, start[:, slot, None] + np.arange(MOTIF_LENGTH)] = MOTIFS[kind[:, slot]]
    labels = (kind == 0).sum(axis=1)
    return torch.from_numpy(ids), torch.from_numpy(labels)


def model_for(backbone: str, args) -> GenolongForSequenceClassification:
    params = dict(BACKBONES[backbone])
    name = "sled" if backbone.startswith("sled") else backbone
    config = GenolongConfig(
        backbone=name,
        vocab_size=VOCAB_SIZE,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=args.length,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=3,
        **params,
    )
    torch.manual_seed(args.seed)
    return GenolongForSequenceClassification(config)


def accuracy(model, ids: torch.Tensor, labels: torch.Tensor, batch_size: int = 64) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, len(ids), batch_size):
            logits = model(ids[first : first + batch_size]).logits
            correct += int((logits.argmax(-1) == labels[first : first + batch_size]).sum())
    return correct / len(ids)


def train(backbone: str, args, test: tuple[torch.Tensor, torch.Tensor]) -> dict:
    model = model_for(backbone, args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, args.learning_rate, total_steps=args.steps, pct_start=0.1
    )
    rng = np.random.default_rng([args.seed, 2])  # the same training examples for every backbone
    start, losses = time.perf_counter(), []
    for _ in range(args.steps):
        model.train()
        ids, labels = make_examples(args.batch_size, args.length, args.min_distance, rng)
        loss = model(ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    return {
        "backbone": backbone,
        "accuracy": accuracy(model, *test),
        "final_loss": float(np.mean(losses[-20:])),
        "train_s": seconds,
        "s_per_step": seconds / args.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbones", nargs="+", default=list(BACKBONES), choices=list(BACKBONES))
    parser.add_argument("--length", type=int, default=256, help="tokens per example, [CLS] included")
    parser.add_argument(
        "--min-distance", type=int, default=96, help="fewest tokens between the two motif parts"
    )
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--test-examples", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.min_distance <= CHUNK:
        parser.error(f"--min-distance must exceed the SLED chunk ({CHUNK}) for the task to be long-range")
    if (args.length - args.min_distance) // 2 < 2 + MOTIF_LENGTH:
        parser.error("--length leaves no room for the motifs at this --min-distance")
    torch.set_num_threads(args.threads)
    test = make_examples(
        args.test_examples, args.length, args.min_distance, np.random.default_rng([args.seed, 3])
    )
    print(
        f"{args.length} tokens, motifs >= {args.min_distance} tokens apart, {args.steps} steps of {args.batch_size}, "
        f"hidden {args.hidden} x {args.layers} layers; test: {len(test[0])} examples, labels 0/1/2 "
        f"{np.bincount(test[1].numpy(), minlength=3).tolist()}; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print(f"{'backbone':>10}  {'accuracy':>8}  {'loss':>6}  {'s/step':>6}", flush=True)
    for backbone in args.backbones:
        row = train(backbone, args, test)
        print(
            f"{row['backbone']:>10}  {row['accuracy']:8.3f}  {row['final_loss']:6.3f}  {row['s_per_step']:6.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
