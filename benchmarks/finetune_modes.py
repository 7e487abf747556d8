"""Full, LoRA and probe fine-tuning side by side: trainable parameters, peak memory, step time.

A base-size BigBird classifier (768 x 12, 12 heads, FFN 3072, block 64, 32K vocabulary: the
shape of GENA-LM's ``gena-lm-bigbird-base-t2t``) with random weights takes training steps on
``--tokens`` tokens (4,096 by default) in each mode (:mod:`genolong.training.modes`): AdamW over
the trainable parameters, forward, backward, update; with ``--checkpointing both`` each mode also
runs with gradient checkpointing (``train.gradient_checkpointing``). The first step (allocation,
warm-up, compilation) is not timed; the table shows the median of the others.

Peak memory:

- on the CPU, each mode runs in its own process and its peak is that process's resident high-water
  mark (``VmHWM``: model, optimizer state, activations and the Python/torch runtime);
- on CUDA (bf16 autocast, float32 weights, as ``bf16-mixed`` trains), the modes run one after the
  other in one process and the peak is ``torch.cuda.max_memory_allocated`` over each mode's steps
  (weights, gradients, optimizer state, activations, workspaces), the previous mode freed first.

Run::

    python benchmarks/finetune_modes.py                                   # CPU, float32
    python benchmarks/finetune_modes.py --tokens 1024 --steps 3 --layers 2
    python benchmarks/finetune_modes.py --device cuda --checkpointing both
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time

MODES = ("full", "lora", "probe")


def one_mode(mode: str, args: argparse.Namespace, checkpointing: bool) -> dict:
    """Train ``args.steps`` steps in ``mode`` in this process; its counts, peak memory and step times."""
    import torch

    from genolong.core.memory import proc_status_mb, reset_peak_memory
    from genolong.model.configuration import GenolongConfig
    from genolong.model.modeling import GenolongForSequenceClassification
    from genolong.tasks.settings import LoraSettings
    from genolong.training.modes import apply_mode, trainable_parameters

    device = torch.device(args.device)
    torch.manual_seed(0)
    config = GenolongConfig(backbone="bigbird", vocab_size=32_000, hidden_size=768, num_hidden_layers=args.layers,
                            num_attention_heads=12, intermediate_size=3072, max_position_embeddings=args.tokens,
                            block_size=64, num_labels=1, problem_type="multi_label_classification")
    model = GenolongForSequenceClassification(config)
    if checkpointing:
        model.gradient_checkpointing_enable()
    model = apply_mode(model, mode, LoraSettings(rank=args.rank)).to(device).train()
    counts = trainable_parameters(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 32_000, (1, args.tokens), generator=generator).to(device)
    labels = torch.ones(1, 1, device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    times = []
    for step in range(args.steps + 1):
        if step == 1:  # the untimed first step allocated the optimizer state: the peak counts it
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            else:
                reset_peak_memory()
        started = time.perf_counter()
        with autocast:
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    peak_mb = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else proc_status_mb("VmHWM")
    del model, optimizer
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"mode": mode, "checkpointing": checkpointing, **counts, "peak_mb": peak_mb,
            "step_s": statistics.median(times[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode (after one untimed)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rank", type=int, default=8, help="LoRA rank")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--checkpointing", choices=("off", "on", "both"), default="off",
                        help="gradient checkpointing in every mode: off, on, or a row with each")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    settings = {"off": (False,), "on": (True,), "both": (False, True)}[args.checkpointing]
    if args.one:
        print(json.dumps(one_mode(args.one, args, settings[0])))
        return
    rows = []
    for checkpointing in settings:
        for mode in MODES:
            if args.device == "cpu":  # a process per mode: VmHWM is per process
                command = [sys.executable, __file__, "--one", mode, "--tokens", str(args.tokens), "--steps",
                           str(args.steps), "--layers", str(args.layers), "--rank", str(args.rank),
                           "--checkpointing", "on" if checkpointing else "off"]
                rows.append(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout))
            else:
                rows.append(one_mode(mode, args, checkpointing))
    precision = "bf16 autocast" if args.device != "cpu" else "float32"
    print(f"BigBird {args.layers} x 768, {args.tokens:,} tokens, batch 1, {args.device}, {precision}, "
          f"LoRA rank {args.rank}; median of {args.steps} steps after one untimed")
    print("| mode | gradient checkpointing | trainable parameters | % of all | peak memory (MB) | vs full | step (s) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    full = {row["checkpointing"]: row for row in rows if row["mode"] == "full"}
    for row in rows:
        versus = 100 * (row["peak_mb"] / full[row["checkpointing"]]["peak_mb"] - 1)
        print(f"| {row['mode']} | {'on' if row['checkpointing'] else 'off'} | {row['trainable']:,} | "
              f"{row['percent']:.2f}% | {row['peak_mb']:,.0f} | {versus:+.0f}% | {row['step_s']:.3f} |")


if __name__ == "__main__":
    main()
