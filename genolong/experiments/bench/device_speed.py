"""Forward and MLM training-step time and peak memory of whole models on one device, in one process.

Attention dropout is 0 for every model (flex has none, and transformers' block-sparse attention
applies none); hidden dropout is on in training. On CUDA the models run under bf16 autocast with
float32 weights (Lightning's ``bf16-mixed``), elsewhere in float32. A training step
(:func:`~genolong.experiments.bench.attention.phase_call`) that runs out of memory is retried once
with gradient checkpointing. A model slower than ``max_step_s`` at one length is not
measured at longer ones. Memory is ``torch.cuda.max_memory_allocated`` over the timed calls (CUDA only).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from genolong.experiments.bench.attention import PEER_BUILDERS, BenchSize, genolong_model, phase_call

#: Benchmark name -> what it is, for the report.
MODELS = {
    "genolong-bigbird": "ours, BigBird attention (flex on CUDA)",
    "hf-bigbird": "transformers BigBird (block_sparse)",
    "genolong-full": "ours, dense attention (SDPA; flash on CUDA in bf16)",
}
#: The converted published models, their sources and dense SDPA (the ``published`` section).
PUBLISHED = {
    "ref-dnabert2": "DNABERT-2's architecture in plain PyTorch (its code's path without Triton)",
    "converted-dnabert2": "ours, DNABERT-2 converted (dense attention, ALiBi)",
    "lsg-dnabert2": "ours, DNABERT-2 converted and made long (LSG, from 512 positions)",
    "hf-modernbert": "transformers ModernBERT (modernGENA's layout: window 128, global every 3rd layer, rotary base 10,000)",
    "converted-modernbert": "ours, ModernBERT converted (window and full layers, rotary)",
    "lsg-modernbert": "ours, ModernBERT converted and made long (LSG, from 1,024 positions)",
    "hf-ntv2": "transformers ESM with rotary positions and NT v2's SwiGLU feed-forward",
    "converted-ntv2": "ours, Nucleotide Transformer v2 converted (dense attention, rotary)",
    "lsg-ntv2": "ours, Nucleotide Transformer v2 converted and made long (LSG, from 2,048 positions)",
    "genolong-full": MODELS["genolong-full"],
}
#: (peer, ours) pairs of the ``published`` tables' ratio columns.
PUBLISHED_RATIOS = (("ref-dnabert2", "converted-dnabert2"), ("hf-modernbert", "converted-modernbert"),
                    ("hf-ntv2", "converted-ntv2"))


@dataclass(frozen=True)
class SpeedPlan:
    """What :func:`run_speed` measures."""

    size: BenchSize
    lengths: tuple[int, ...]
    phases: tuple[str, ...] = ("forward", "train")
    repeats: int = 3
    max_step_s: float = 10.0
    seed: int = 0


def build_model(name: str, size: BenchSize, length: int, mlm: bool) -> torch.nn.Module:
    """The model ``name`` (a key of :data:`MODELS` or :data:`PUBLISHED`) with random weights at ``size``."""
    if name.startswith("genolong-"):
        backbone = name.removeprefix("genolong-")
        return genolong_model(backbone, size, length, mlm, attention_probs_dropout_prob=0.0)[0]
    model = PEER_BUILDERS[name](size, length, mlm)[0]
    if name == "hf-bigbird":
        model.config.attention_probs_dropout_prob = 0.0
    return model


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed(call: Callable[[], None], device: torch.device, repeats: int) -> tuple[float, float | None]:
    """(median seconds, peak GiB) of ``repeats`` calls after two untimed ones (compiling, warming up)."""
    for _ in range(2):
        call()
    _synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        _synchronize(device)
        times.append(time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    return statistics.median(times), peak


def measure(name: str, length: int, phase: str, plan: SpeedPlan, device: torch.device,
            checkpointing: bool = False, batch: int = 1) -> dict:
    """One row: ``name`` at ``length`` tokens, ``phase`` ``forward`` or ``train``, ``batch`` sequences a call
    (``tokens_per_s`` counts all of them)."""
    torch.manual_seed(plan.seed)
    model = build_model(name, plan.size, length, mlm=phase == "train").to(device)
    if checkpointing:
        model.gradient_checkpointing_enable()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    call = phase_call(model, phase, length=length, vocab_size=plan.size.vocab_size, seed=plan.seed,
                      autocast=autocast, device=device, fused=device.type == "cuda", batch=batch)
    seconds, peak = _timed(call, device, plan.repeats)
    return {"model": name, "tokens": length, "phase": phase, "status": "ok", "seconds": seconds,
            "tokens_per_s": batch * length / seconds, "peak_gb": peak, "checkpointing": checkpointing}


def release(device: torch.device) -> None:
    """Free what the last model left: Python's garbage, then CUDA's cached blocks."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def run_speed(plan: SpeedPlan, device: torch.device, models=tuple(MODELS),
              say: Callable[[str], None] = print) -> Iterator[dict]:
    """Every model at every length and phase (length-major), each row yielded as it is measured: rows as
    :func:`measure` returns, with ``status`` ``oom``, ``skipped: ...`` or the error where there is no time."""
    too_slow, statuses = set(), set()
    for length in plan.lengths:
        for name in models:
            for phase in plan.phases:
                if (name, phase) in too_slow:
                    row = {"status": f"skipped: over {plan.max_step_s:g} s at a shorter length"}
                elif phase == "train" and (name, length, "forward", "oom") in statuses:
                    row = {"status": "oom: its forward pass ran out of memory"}
                else:
                    row = _measure_or_retry(name, length, phase, plan, device)
                row = {"model": name, "tokens": length, "phase": phase, **row}
                if row["status"] == "ok" and row["seconds"] > plan.max_step_s:
                    too_slow.add((name, phase))
                statuses.add((name, length, phase, row["status"]))
                say(format_row(row))
                release(device)
                yield row


def _measure_or_retry(name: str, length: int, phase: str, plan: SpeedPlan, device: torch.device) -> dict:
    for checkpointing in (False, True) if phase == "train" else (False,):
        try:
            return measure(name, length, phase, plan, device, checkpointing)
        except torch.OutOfMemoryError:
            release(device)
        except Exception as err:  # a peer failing at some length is a result, not a crash
            return {"status": f"error: {type(err).__name__}: {str(err).splitlines()[0][:160]}"}
    return {"status": "oom"}


def format_row(row: dict) -> str:
    where = f"{row['model']:>17} {row['tokens']:>6} {row['phase']:>7}"
    if row["status"] != "ok":
        return f"{where}: {row['status']}"
    peak = "" if row["peak_gb"] is None else f"  peak {row['peak_gb']:6.2f} GiB"
    checkpointing = "  (gradient checkpointing)" if row["checkpointing"] else ""
    return f"{where}: {row['seconds'] * 1e3:9.1f} ms  {row['tokens_per_s']:10.0f} tokens/s{peak}{checkpointing}"


def speed_table(rows: list[dict], phase: str,
                ratios: tuple[tuple[str, str], ...] = (("hf-bigbird", "genolong-bigbird"),
                                                      ("genolong-full", "genolong-bigbird"))) -> str:
    """Markdown: one row per length, time (and peak memory) per model, then ``peer / ours`` time
    ratios for each (peer, ours) pair of ``ratios``."""
    models = list(dict.fromkeys(row["model"] for row in rows))
    lengths = list(dict.fromkeys(row["tokens"] for row in rows))
    cell = {(row["model"], row["tokens"]): row for row in rows if row["phase"] == phase}
    lines = ["| tokens | " + " | ".join(models + [f"{peer} / {ours}" for peer, ours in ratios]) + " |",
             "|---:|" + "---:|" * (len(models) + len(ratios))]
    for length in lengths:
        values = [_cell(cell.get((model, length))) for model in models]
        values += [_ratio(cell.get((peer, length)), cell.get((ours, length))) for peer, ours in ratios]
        lines.append(f"| {length:,} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def _cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row["status"] != "ok":
        return row["status"].split(":")[0]
    peak = "" if row["peak_gb"] is None else f", {row['peak_gb']:.1f} GiB"
    return f"{row['seconds'] * 1e3:.1f} ms{peak}" + (" (ckpt)" if row["checkpointing"] else "")


def _ratio(peer: dict | None, ours: dict | None) -> str:
    if not peer or not ours or peer["status"] != "ok" or ours["status"] != "ok":
        return "-"
    return f"{peer['seconds'] / ours['seconds']:.2f}x"
