"""Attention benchmark worker: one model at one length, in a fresh process
(``python -m genolong.experiments.bench.attention SPEC_JSON``), prints a JSON row per phase
(:func:`phase_call`). ``time_s`` is the best timed call, ``peak_mb`` the resident-set high-water
mark of the first timed call above the resident set before it (the method:
``docs/results/attention.md``). ``floor`` is our encoder with attention replaced by "return v", so
``time / floor - 1`` is the share the attention adds. :mod:`.runner` starts the workers.
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
import transformers
from torch import nn

from genolong.core.errors import ConfigError
from genolong.core.memory import proc_status_mb, reset_peak_memory
from genolong.experiments.bench.converted import CONVERTED, LONG, SOURCES, converted_builders
from genolong.model.encoder import Block
from genolong.model.modeling import GenolongConfig, GenolongForMaskedLM, GenolongModel

#: transformers' models measured beside ours, by benchmark name, with the installed transformers.
PEERS = ("hf-bigbird", "hf-longformer", "hf-bert")
#: Measured only when asked for (``--peers``): published models' peers and conversions (:mod:`.converted`).
OPTIONAL_PEERS = (*SOURCES, *CONVERTED, *LONG)
#: Peers that need transformers 4.x (lsg-converter; BigBird before 5.x filled dense L x L probabilities),
#: measured with a package directory holding it first on the worker's PYTHONPATH (``legacy_site``).
LEGACY_PEERS = ("hf4-bigbird", "lsg-bert")
#: Every model that is not ours.
ALL_PEERS = PEERS + LEGACY_PEERS + OPTIONAL_PEERS
FLOOR = "floor"
PHASES = ("forward", "train")
MASK_FRACTION = 0.15


@dataclass(frozen=True)
class BenchSize:
    """Model size shared by every model in a run."""

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


class SkipAttention(nn.Module):
    """The floor's attention: skipped, returns v. Shapes: (B, H, L, D) -> (B, H, L, D)."""

    def forward(self, q, k, v, padding_mask=None):
        return v


def genolong_config(backbone: str, size: BenchSize, length: int, **changes):
    """The configuration of our model with ``backbone`` attention at its paper defaults; ConfigError
    when ``size`` and ``length`` are impossible for ``backbone``."""
    try:
        return GenolongConfig(backbone=backbone, max_position_embeddings=length, **changes, **asdict(size))
    except ConfigError as err:
        raise ConfigError(f"{backbone} at length {length}: {err}") from None


def genolong_model(backbone: str, size: BenchSize, length: int, mlm: bool, **changes):
    """Our encoder (or MLM model) with ``backbone`` attention at its paper defaults; ``changes`` set
    other config fields."""
    config = genolong_config(backbone, size, length, **changes)
    return (GenolongForMaskedLM if mlm else GenolongModel)(config), {}


def floor_model(size: BenchSize, length: int, mlm: bool):
    """Our model with every attention replaced by :class:`SkipAttention`."""
    model, inputs = genolong_model("full", size, length, mlm)
    for block in model.modules():
        if isinstance(block, Block):
            block.attention = SkipAttention()
    return model, inputs


def hf_bigbird(size: BenchSize, length: int, mlm: bool):
    """transformers' BigBird, block_sparse with the paper's pattern (block 64, 3 random blocks)."""
    config = transformers.BigBirdConfig(attention_type="block_sparse", block_size=64, num_random_blocks=3,
                                        max_position_embeddings=length, **asdict(size))
    return (transformers.BigBirdForMaskedLM if mlm else transformers.BigBirdModel)(config), {}


def hf_longformer(size: BenchSize, length: int, mlm: bool):
    """transformers' Longformer: 512-token window (256 each side), [CLS] global."""
    config = transformers.LongformerConfig(attention_window=512, max_position_embeddings=length + 2,
                                           **asdict(size))
    global_mask = torch.zeros(1, length, dtype=torch.long)
    global_mask[0, 0] = 1
    model = (transformers.LongformerForMaskedLM if mlm else transformers.LongformerModel)(config)
    return model, {"global_attention_mask": global_mask}


def hf_bert(size: BenchSize, length: int, mlm: bool):
    """transformers' BERT with dense attention through SDPA."""
    config = transformers.BertConfig(max_position_embeddings=length, attn_implementation="sdpa",
                                     **asdict(size))
    return (transformers.BertForMaskedLM if mlm else transformers.BertModel)(config), {}


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


#: Peer name -> ``(size, length, mlm) -> (model, extra inputs)``.
PEER_BUILDERS: dict[str, Callable] = {
    "hf-bigbird": hf_bigbird, "hf-longformer": hf_longformer, "hf-bert": hf_bert, "hf4-bigbird": hf_bigbird,
    "lsg-bert": lsg_bert, **SOURCES,
}
PEER_BUILDERS |= converted_builders(PEER_BUILDERS)


def build(spec: Spec, mlm: bool):
    """(model, extra inputs) for ``spec.model``: a peer, ``floor`` or one of our backbones."""
    if spec.model == FLOOR:
        return floor_model(spec.size, spec.length, mlm)
    if spec.model in PEER_BUILDERS:
        return PEER_BUILDERS[spec.model](spec.size, spec.length, mlm)
    return genolong_model(spec.model, spec.size, spec.length, mlm)


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
    """Collects the distinct log messages of genolong (which attention path ran, for instance), in order."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: dict[str, None] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.setdefault(record.getMessage())


def phase_call(model, phase: str, *, length: int, vocab_size: int, seed: int, autocast,
               device: torch.device | str = "cpu", fused: bool = True, extra: dict | None = None, batch: int = 1):
    """One call of ``phase`` on ``model`` (put in eval or train mode): ``forward`` under
    ``torch.no_grad``, or ``train``, an MLM step. The (``batch``, ``length``) token ids and the masked
    positions are drawn from ``seed``: [CLS], then ids from 5 to ``vocab_size``; 15% masked."""
    extra = extra or {}
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (batch, length), generator=generator)
    ids[:, 0] = 2  # [CLS]
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
            messages.messages[f"transformers {transformers.__version__}"] = None
        row.update(phase=phase, status="ok", notes="; ".join(messages.messages), load1=os.getloadavg()[0])
        print(json.dumps(row), flush=True)
        gc.collect()


if __name__ == "__main__":
    data = json.loads(sys.argv[1])
    worker(Spec(**data | {"size": BenchSize(**data["size"]), "phases": tuple(data["phases"])}))
