"""Attention benchmark: our backbones against transformers' BigBird, Longformer and BERT.

For each model and sequence length, one fresh Python process (so memory peaks are its own
and a peer running out of memory kills nothing else) builds the model at the same small
size and measures, at batch 1 on ``threads`` CPU threads:

* ``forward``: the bare encoder (``GenolongModel``, ``BigBirdModel``...) in eval mode under
  ``torch.no_grad``;
* ``train``: one MLM training step of the ``...ForMaskedLM`` model -- forward with 15% of the
  tokens masked, loss, backward, fused AdamW step -- in train mode (dropout on).

Each phase is called once untimed (``first_call_s``: compilation, lazy initialisation),
then ``repeats`` times (fewer once the timed calls have taken ``budget_s``). ``time_s`` is
the best of the timed calls: on a shared machine, the one least slowed by other processes
(``time_median_s`` is also kept, and ``cpu_s``, the process CPU time of the best call: far
above ``threads * time_s`` the threads were spinning, far below they were waiting for a core). Peak memory is the resident-set high-water mark during the first timed call minus
the resident set just before it, on Linux (``/proc/self/clear_refs`` resets the mark;
``malloc_trim`` first returns freed heap pages to the system, so memory freed by the untimed
call cannot hide the peak). It counts activations, workspaces, gradients and optimizer
state, not the model and inputs already resident.

``floor`` is our encoder with the attention replaced by "return v": every other cost of
the model (embeddings, projections, FFN, norms, heads), so ``time / floor - 1`` is the
share the attention adds.

This module is the worker, ``python -m genolong.experiments.bench.attention SPEC_JSON``; :mod:`genolong.experiments.bench.runner`
starts one per model and length and :mod:`genolong.experiments.bench.report` turns the rows into CSV, markdown
tables and a plot; ``genolong bench attention`` runs it all.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from genolong.core.errors import ConfigError
from genolong.core.memory import proc_status_mb, reset_peak_memory
from genolong.experiments.bench.converted import (
    CONVERTED,
    LONG,
    converted_builders,
    hf_esm,
    hf_modernbert,
    hf_ntv2,
    ref_dnabert2,
)
from genolong.model.encoder import Block

#: transformers' models measured beside ours, by benchmark name, with the installed transformers.
PEERS = ("hf-bigbird", "hf-longformer", "hf-bert")
#: Measured only when asked for (``--peers``): transformers' ESM and ModernBERT, DNABERT-2's
#: architecture, and the genolong conversions of them all (:mod:`genolong.experiments.bench.converted`).
OPTIONAL_PEERS = ("hf-esm", "ref-dnabert2", "hf-modernbert", "hf-ntv2", *CONVERTED, *LONG)
#: Peers that need transformers 4.x (lsg-converter runs only there; transformers 4.44's BigBird
#: does not fill the dense L x L probabilities that 5.x does): measured with a package directory
#: holding transformers 4.x put first on the worker's PYTHONPATH (``legacy_site``).
LEGACY_PEERS = ("hf4-bigbird", "lsg-bert")
#: Every model that is not ours.
ALL_PEERS = PEERS + LEGACY_PEERS + OPTIONAL_PEERS
FLOOR = "floor"
PHASES = ("forward", "train")
MASK_FRACTION = 0.15


@dataclass(frozen=True)
class BenchSize:
    """Model size shared by every model in a run (hidden 256, 4 layers, 4 heads, FFN 1024)."""

    vocab_size: int = 32000
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 1024


@dataclass(frozen=True)
class Spec:
    """One worker process: one model at one length, the phases in order."""

    model: str
    length: int
    size: BenchSize = field(default_factory=BenchSize)
    dtype: str = "fp32"
    threads: int = 2
    repeats: int = 3
    budget_s: float = 30.0
    phases: tuple[str, ...] = PHASES
    seed: int = 0
    legacy_site: str | None = None


# --------------------------------------------------------------------------- models


class SkipAttention(nn.Module):
    """The floor's attention: skipped, returns v. Shapes: (B, H, L, D) -> (B, H, L, D)."""

    def forward(self, q, k, v, padding_mask=None):
        return v


def genolong_config(backbone: str, size: BenchSize, length: int):
    """The configuration of our model with ``backbone`` attention at its paper defaults.

    Raises:
        ConfigError: ``size`` and ``length`` are impossible for ``backbone``.
    """
    from genolong.model.modeling import GenolongConfig

    try:
        return GenolongConfig(backbone=backbone, max_position_embeddings=length, **asdict(size))
    except ConfigError as err:
        raise ConfigError(f"{backbone} at length {length}: {err}") from None


def genolong_model(backbone: str, size: BenchSize, length: int, mlm: bool):
    """Our encoder (or MLM model) with ``backbone`` attention at its paper defaults."""
    from genolong.model.modeling import GenolongForMaskedLM, GenolongModel

    return (GenolongForMaskedLM if mlm else GenolongModel)(genolong_config(backbone, size, length)), {}


def floor_model(size: BenchSize, length: int, mlm: bool):
    """Our model with every attention replaced by :class:`SkipAttention`."""
    model, inputs = genolong_model("full", size, length, mlm)
    for block in model.modules():
        if isinstance(block, Block):
            block.attention = SkipAttention()
    return model, inputs


def hf_bigbird(size: BenchSize, length: int, mlm: bool):
    """transformers' BigBird, block_sparse with the paper's pattern (block 64, 3 random blocks)."""
    from transformers import BigBirdConfig, BigBirdForMaskedLM, BigBirdModel

    config = BigBirdConfig(attention_type="block_sparse", block_size=64, num_random_blocks=3,
                           max_position_embeddings=length, **asdict(size))
    return (BigBirdForMaskedLM if mlm else BigBirdModel)(config), {}


def hf_longformer(size: BenchSize, length: int, mlm: bool):
    """transformers' Longformer: 512-token window (256 each side), [CLS] global."""
    from transformers import LongformerConfig, LongformerForMaskedLM, LongformerModel

    config = LongformerConfig(attention_window=512, max_position_embeddings=length + 2, **asdict(size))
    global_mask = torch.zeros(1, length, dtype=torch.long)
    global_mask[0, 0] = 1
    return (LongformerForMaskedLM if mlm else LongformerModel)(config), {"global_attention_mask": global_mask}


def hf_bert(size: BenchSize, length: int, mlm: bool):
    """transformers' BERT with dense attention through SDPA."""
    from transformers import BertConfig, BertForMaskedLM, BertModel

    config = BertConfig(max_position_embeddings=length, attn_implementation="sdpa", **asdict(size))
    return (BertForMaskedLM if mlm else BertModel)(config), {}


def lsg_bert(size: BenchSize, length: int, mlm: bool):
    """LSG-BERT from lsg-converter (Condevaux & Harispe 2023) at its defaults, which are our
    ``lsg`` backbone's: local blocks of 128, "norm" sparsity with factor 2, 1 global token."""
    from lsg_converter.bert.modeling_lsg_bert import LSGBertConfig, LSGBertForMaskedLM, LSGBertModel

    config = LSGBertConfig(max_position_embeddings=length, **asdict(size))
    model = (LSGBertForMaskedLM if mlm else LSGBertModel)(config)
    for module in model.modules():  # lsg-converter 0.1.9 predates the attribute BertModel.forward reads
        if isinstance(module, LSGBertModel):
            module.attn_implementation = "eager"
    return model, {}


def build(spec: Spec, mlm: bool):
    """(model, extra inputs) for ``spec.model``: a peer, ``floor`` or one of our backbones."""
    builders: dict[str, Callable] = {
        "hf-bigbird": hf_bigbird,
        "hf-longformer": hf_longformer,
        "hf-bert": hf_bert,
        "hf4-bigbird": hf_bigbird,
        "lsg-bert": lsg_bert,
        "hf-esm": hf_esm,
        "ref-dnabert2": ref_dnabert2,
        "hf-modernbert": hf_modernbert,
        "hf-ntv2": hf_ntv2,
    }
    builders |= converted_builders(builders)
    if spec.model == FLOOR:
        return floor_model(spec.size, spec.length, mlm)
    if spec.model in builders:
        return builders[spec.model](spec.size, spec.length, mlm)
    return genolong_model(spec.model, spec.size, spec.length, mlm)


# --------------------------------------------------------------------------- measuring


def measure(call: Callable[[], Any], repeats: int, budget_s: float) -> dict[str, Any]:
    """First (untimed) call, then up to ``repeats`` timed calls, fewer once they have taken
    ``budget_s`` together; the first timed call also measures memory."""
    start = time.perf_counter()
    call()
    first_call = time.perf_counter() - start
    base_mb = reset_peak_memory()
    times, cpu_times, peak_mb = [], [], None
    while len(times) < repeats and (not times or sum(times) < budget_s):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - start_cpu)
        if peak_mb is None:
            peak_mb = proc_status_mb("VmHWM") - base_mb
    best = min(range(len(times)), key=times.__getitem__)
    return {"time_s": times[best], "time_median_s": statistics.median(times), "cpu_s": cpu_times[best],
            "runs": len(times), "first_call_s": first_call, "peak_mb": peak_mb, "resident_mb": base_mb}


class _Messages(logging.Handler):
    """Collects the distinct log messages of genolong (which attention path ran, for instance)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.messages:
            self.messages.append(message)


def phase_call(model, phase: str, *, length: int, vocab_size: int, seed: int, autocast,
               device: torch.device | str = "cpu", fused: bool = True, extra: dict | None = None):
    """One call of ``phase`` on ``model`` (put in eval or train mode) at batch 1: ``forward`` under
    ``torch.no_grad``, or ``train``, an MLM step. The (1, ``length``) token ids and the masked
    positions are drawn from ``seed``: [CLS], then ids from 5 to ``vocab_size``; 15% masked."""
    extra = extra or {}
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (1, length), generator=generator)
    ids[0, 0] = 2  # [CLS]
    ids = ids.to(device)
    if phase == "forward":
        model.eval()

        def forward():
            with torch.no_grad(), autocast:
                model(input_ids=ids, **extra)

        return forward
    model.train()
    masked = (torch.rand(ids.shape, generator=generator) < MASK_FRACTION).to(device)
    labels, inputs = torch.where(masked, ids, -100), ids.masked_fill(masked, 4)  # [MASK]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)

    def step():
        with autocast:
            loss = model(input_ids=inputs, labels=labels, **extra).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def run_phase(spec: Spec, phase: str) -> dict[str, Any]:
    """Build the model for ``phase`` and measure it; one result row."""
    torch.manual_seed(spec.seed)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=spec.dtype == "bf16")
    model, extra = build(spec, mlm=phase == "train")
    call = phase_call(model, phase, length=spec.length, vocab_size=spec.size.vocab_size, seed=spec.seed,
                      autocast=autocast, extra=extra)
    return measure(call, spec.repeats, spec.budget_s)


def worker(spec: Spec) -> None:
    """Run the phases of ``spec``, printing one JSON row per phase as soon as it is measured."""
    torch.set_num_threads(spec.threads)
    messages = _Messages()
    logging.getLogger("genolong").addHandler(messages)
    logging.getLogger("genolong").setLevel(logging.INFO)
    for phase in spec.phases:
        messages.messages.clear()
        row = run_phase(spec, phase)
        if spec.model in ALL_PEERS:
            import transformers

            messages.messages.append(f"transformers {transformers.__version__}")
        row.update(phase=phase, status="ok", notes="; ".join(messages.messages), load1=os.getloadavg()[0])
        print(json.dumps(row), flush=True)
        gc.collect()


def spec_from_json(text: str) -> Spec:
    data = json.loads(text)
    data["size"] = BenchSize(**data["size"])
    data["phases"] = tuple(data["phases"])
    return Spec(**data)


if __name__ == "__main__":
    worker(spec_from_json(sys.argv[1]))
