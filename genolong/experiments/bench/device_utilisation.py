"""How close a training step runs to the hardware's limit: model FLOPs, achieved FLOP/s and MFU.

Model FLOPs of one MLM training step (forward and backward), after PaLM (Chowdhery et al. 2022, App. B),
per token::

    6 * N  +  12 * n_layers * d_model * K

``N`` counts the weights of every ``nn.Linear`` of the model (the encoder's projections and feed-forwards and
the MLM head's; embeddings are looked up, not multiplied). ``K`` is the mean number of keys a query attends
to in the pattern the attention actually used: the sequence length for dense attention, counted from the
layer's :class:`~genolong.attention.pattern.BlockPattern` for the block-sparse ones (:func:`keys_per_query`).
Per layer and token, ``Q K^T`` and ``softmax(.) V`` take ``2 * d_model * K`` FLOPs each forward, three times
that with the backward. Recomputation under gradient checkpointing is not counted (model FLOPs, not hardware
FLOPs), so MFU stays comparable across settings.

Achieved FLOP/s = model FLOPs of the step / its median time; MFU = achieved / peak, against two peaks: the
card's dense bf16 datasheet rate where the card is known (:data:`DATASHEET_BF16`), and the rate a large
bf16 matrix product reaches on this device (:func:`matmul_peak`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from genolong.attention.blocksparse import BlockSparseAttention
from genolong.attention.pattern import BlockPattern
from genolong.experiments.bench.attention import BenchSize, genolong_model
from genolong.experiments.bench.device_speed import SpeedPlan, measure, release

#: Dense bf16 tensor-core peaks (FLOP/s, no sparsity) by a substring of the device name, most specific first.
DATASHEET_BF16 = (("H200", 989.4e12), ("H100 PCIe", 756.0e12), ("H100", 989.4e12), ("A100", 312.0e12),
                  ("L40S", 362.1e12))
#: The utilisation section's models: the name of the run's row -> (backbone, flex kernel backend or None).
MODELS = {"genolong-bigbird": ("bigbird", None), "genolong-bigbird-flex-flash": ("bigbird", "FLASH"),
          "genolong-full": ("full", None)}
#: Query rows sampled to count a pattern's keys per query (all rows when the pattern has fewer).
SAMPLED_QUERIES = 1024


@dataclass(frozen=True)
class UtilisationPlan:
    """What the utilisation section measures: ``lengths`` at batch 1, ``batches`` at ``lengths[0]``, then the
    longest of ``context_lengths`` one bigbird training step fits (gradient checkpointing, in order, until the
    first that runs out of memory or takes more than ``max_step_s``)."""

    size: BenchSize
    lengths: tuple[int, ...]
    batches: tuple[int, ...]
    context_lengths: tuple[int, ...]
    repeats: int = 3
    max_step_s: float = 20.0


def keys_per_query(pattern: BlockPattern) -> float:
    """The mean number of keys a query of ``pattern`` sees (extra keys included), over every query; counted
    on up to :data:`SAMPLED_QUERIES` evenly spaced rows of each head's dense mask, row by row in chunks."""
    length = pattern.seq_len
    rows = torch.linspace(0, length - 1, min(length, SAMPLED_QUERIES), device=pattern.device).round().long()
    allowed, total = pattern.mask_mod(), 0.0
    heads = torch.arange(pattern.heads, device=pattern.device)[:, None, None]
    keys = torch.arange(pattern.num_keys, device=pattern.device)[None, None, :]
    for chunk in rows.split(64):
        total += float(allowed(None, heads, chunk[None, :, None], keys).sum())
    return total / (len(rows) * pattern.heads)


def model_flops_per_token(model: nn.Module, keys: float) -> float:
    """Training FLOPs per token of ``model`` (the formula of the module docstring) with ``keys`` keys per query."""
    weights = sum(module.weight.numel() for module in model.modules() if isinstance(module, nn.Linear))
    config = model.config
    return 6.0 * weights + 12.0 * config.num_hidden_layers * config.hidden_size * keys


def attended_keys(model: nn.Module, length: int, device: torch.device) -> float:
    """Keys per query of ``model``'s first attention at ``length`` tokens: its block pattern's count (at the
    length the layer sees, padding and extra global tokens included), or ``length`` for dense attention."""
    layer = next((m for m in model.modules() if isinstance(m, BlockSparseAttention)), None)
    if layer is None:
        return float(length)
    seen = []
    hook = layer.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[-2]))
    try:
        with torch.no_grad():
            model.eval()(input_ids=torch.full((1, length), 5, device=device))
    finally:
        hook.remove()
    return keys_per_query(layer.pattern_for(seen[0], device))


def datasheet_peak(device: torch.device) -> float | None:
    """The card's dense bf16 peak in FLOP/s (:data:`DATASHEET_BF16`), or None (a CPU or an unlisted card)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in DATASHEET_BF16 if key in name), None)


def matmul_peak(device: torch.device, size: int | None = None, repeats: int = 10) -> float:
    """FLOP/s of the best of ``repeats`` (``size`` x ``size``) @ (``size`` x ``size``) products: bf16 on CUDA
    (8,192 by default), float32 on the CPU (1,024)."""
    cuda = device.type == "cuda"
    size = size or (8192 if cuda else 1024)
    dtype = torch.bfloat16 if cuda else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    best = float("inf")
    for _ in range(repeats + 2):
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        a @ b
        if cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return 2.0 * size**3 / best


def run_utilisation(plan: UtilisationPlan, device: torch.device, say: Callable[[str], None]) -> Iterator[dict]:
    """Rows, each yielded as measured: the device's matmul peak, then MFU rows (lengths, then batches), then
    the context rows with gradient checkpointing. A model whose kernel is unavailable (flex's FLASH backend
    without its package) gives one row saying why."""
    measured, datasheet = matmul_peak(device), datasheet_peak(device)
    say(f"  matmul peak {measured / 1e12:.1f} TFLOP/s" + (f", datasheet {datasheet / 1e12:.0f}" if datasheet else ""))
    yield {"check": "utilisation", "kind": "peak", "matmul_tflops": measured / 1e12,
           "datasheet_tflops": datasheet and datasheet / 1e12, "status": "ok"}
    cases = [(length, 1) for length in plan.lengths] + [(plan.lengths[0], b) for b in plan.batches if b != 1]
    unavailable = set()
    for length, batch in cases:
        for name in MODELS:
            if name in unavailable:
                continue
            row = _measure(name, length, batch, plan, device, measured, datasheet, checkpointing=False)
            if row["status"].startswith("unavailable"):
                unavailable.add(name)
            say(_line(row))
            yield row
    for length in plan.context_lengths:
        row = _measure("genolong-bigbird", length, 1, plan, device, measured, datasheet, checkpointing=True)
        row["kind"] = "context"
        say(_line(row))
        yield row
        if row["status"] != "ok" or row["seconds"] > plan.max_step_s:
            break


def _measure(name: str, length: int, batch: int, plan: UtilisationPlan, device: torch.device, measured: float,
             datasheet: float | None, checkpointing: bool) -> dict:
    from genolong.attention.flex import flex_backend

    backbone, backend = MODELS[name]
    row = {"check": "utilisation", "kind": "mfu", "model": name, "tokens": length, "batch": batch,
           "checkpointing": checkpointing}
    if backend and device.type != "cuda":
        return row | {"status": f"unavailable: flex's {backend} backend runs on CUDA only"}
    speed = SpeedPlan(size=plan.size, lengths=(length,), repeats=plan.repeats)
    try:
        model = genolong_model(backbone, plan.size, length, mlm=True, attention_probs_dropout_prob=0.0)[0].to(device)
        keys = attended_keys(model, length, device)
        flops = model_flops_per_token(model, keys)
        del model
        with flex_backend(backend or "AUTO"):
            timing = measure(name.removesuffix("-flex-flash"), length, "train", speed, device, checkpointing, batch)
    except torch.OutOfMemoryError:
        release(device)
        return row | {"status": "oom"}
    except Exception as err:  # a kernel missing here is a result, not a crash
        release(device)
        state = "unavailable" if backend else "error"
        return row | {"status": f"{state}: {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"}
    release(device)
    achieved = flops * batch * length / timing["seconds"]
    return row | {"status": "ok", "seconds": timing["seconds"], "tokens_per_s": timing["tokens_per_s"],
                  "peak_gb": timing["peak_gb"], "keys_per_query": keys, "flops_per_token": flops,
                  "tflops": achieved / 1e12, "mfu_measured": achieved / measured,
                  "mfu_datasheet": datasheet and achieved / datasheet}


def _line(row: dict) -> str:
    where = f"  {row['model']:>27} {row['tokens']:>8} x{row['batch']:<3}"
    if row["status"] != "ok":
        return f"{where}: {row['status']}"
    datasheet = "" if row["mfu_datasheet"] is None else f", MFU {100 * row['mfu_datasheet']:.1f}% of datasheet"
    return (f"{where}: {row['seconds'] * 1e3:9.1f} ms, K={row['keys_per_query']:,.0f} keys/query, "
            f"{row['tflops']:.2f} TFLOP/s ({100 * row['mfu_measured']:.1f}% of matmul{datasheet})"
            + (" (ckpt)" if row["checkpointing"] else ""))
