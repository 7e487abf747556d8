"""Full, LoRA and probe fine-tuning side by side: trainable parameters, peak memory, step time.

A base-size BigBird classifier (768 x 12, 12 heads, FFN 3072, block 64, 32K vocabulary: the
shape of GENA-LM's ``gena-lm-bigbird-base-t2t``) with random weights takes training steps on
``--tokens`` tokens (4,096 by default) in each mode (:mod:`genolong.tasks.modes`): AdamW over
the trainable parameters, forward, backward, update. Each mode runs in its own process, so its
peak resident memory (``VmHWM``, model + optimizer state + activations) is its own; the first
step (allocation, warm-up) is not timed, the table shows the median of the others.

Run (CPU; minutes per mode at 4,096 tokens)::

    python benchmarks/finetune_modes.py
    python benchmarks/finetune_modes.py --tokens 1024 --steps 3 --layers 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def one_mode(mode: str, tokens: int, steps: int, layers: int, rank: int) -> dict:
    """Train ``steps`` steps in ``mode`` in this process; its counts, peak RSS and step times."""
    import torch

    from genolong.memory import proc_status_mb, reset_peak_memory
    from genolong.model.configuration import GenolongConfig
    from genolong.model.modeling import GenolongForSequenceClassification
    from genolong.tasks.modes import LoraSettings, apply_mode, trainable_parameters

    torch.manual_seed(0)
    config = GenolongConfig(backbone="bigbird", vocab_size=32_000, hidden_size=768, num_hidden_layers=layers,
                            num_attention_heads=12, intermediate_size=3072, max_position_embeddings=tokens,
                            block_size=64, num_labels=1, problem_type="multi_label_classification")
    model = apply_mode(GenolongForSequenceClassification(config), mode, LoraSettings(rank=rank)).train()
    counts = trainable_parameters(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 32_000, (1, tokens), generator=generator)
    labels = torch.ones(1, 1)
    reset_peak_memory()
    times = []
    for _ in range(steps + 1):
        started = time.perf_counter()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return {"mode": mode, **counts, "peak_mb": proc_status_mb("VmHWM"), "step_s": statistics.median(times[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode (after one untimed)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rank", type=int, default=8, help="LoRA rank")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_mode(args.one, args.tokens, args.steps, args.layers, args.rank)))
        return
    rows = []
    for mode in ("full", "lora", "probe"):
        command = [sys.executable, __file__, "--one", mode, "--tokens", str(args.tokens), "--steps",
                   str(args.steps), "--layers", str(args.layers), "--rank", str(args.rank)]
        rows.append(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout))
    full = rows[0]
    print(f"BigBird {args.layers} x 768, {args.tokens:,} tokens, batch 1, LoRA rank {args.rank}; "
          f"median of {args.steps} steps after one untimed")
    print("| mode | trainable parameters | % of all | peak memory (MB) | vs full | step (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['mode']} | {row['trainable']:,} | {row['percent']:.2f}% | {row['peak_mb']:,.0f} | "
              f"{100 * (row['peak_mb'] / full['peak_mb'] - 1):+.0f}% | {row['step_s']:.2f} |")


if __name__ == "__main__":
    main()
