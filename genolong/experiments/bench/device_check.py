"""``genolong bench gpu``: one command that checks a CUDA machine end to end and measures it.

The sections (:data:`SECTIONS`, run by :data:`SECTION_FUNCTIONS`; the slowest last) run in order, each in
a process of its own for at most its time budget (:data:`GPU_BUDGETS`, which together fit one 10-minute
command; :mod:`.section_runner`), each even when an earlier one fails or was stopped; their rows are
saved as they come. ``--cpu`` runs the same code at tiny sizes on the CPU (the gathered-blocks path
stands in for flex). Writes ``OUT/device_check.json`` (after every section) and ``.md``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import transformers

from genolong.attention import available_attentions
from genolong.core.children import child_arguments, run_genolong, run_module
from genolong.core.files import atomic_write_text
from genolong.dna.sequence import clean, read_fasta
from genolong.experiments.bench.attention import BenchSize
from genolong.experiments.bench.device_inference import compare_inference
from genolong.experiments.bench.device_report import markdown
from genolong.experiments.bench.device_speed import PUBLISHED, SpeedPlan, release, run_speed
from genolong.experiments.bench.device_utilisation import UtilisationPlan, run_utilisation
from genolong.experiments.bench.kernel_check import BACKBONES, KernelCase, check_case
from genolong.experiments.bench.section_runner import run_section

#: The sections in the order they run: quick checks first, the long measurements last.
SECTIONS = ("tests", "train", "pretrain", "inference", "kernels", "published", "speed", "utilisation")
#: Seconds each section may take on a GPU, its process's start included (540 s in all: one command
#: within a 10-minute limit).
GPU_BUDGETS = {"tests": 45, "train": 30, "pretrain": 50, "inference": 60, "kernels": 75, "published": 90,
               "speed": 90, "utilisation": 100}
#: ``--cpu``: generous, since the check's logic, not a time, is what the CPU mode tests.
CPU_BUDGETS = dict.fromkeys(SECTIONS, 600)
#: Vocabulary of the train section's models: the tiny tokenizer's size.
TRAIN_VOCAB = 4096


@dataclass(frozen=True)
class CheckPlan:
    """Sizes of a run: the GPU check's (the defaults), or the tiny ones of ``--cpu``."""

    speed: SpeedPlan
    published: SpeedPlan
    utilisation: UtilisationPlan
    device: torch.device = torch.device("cuda")
    kernel_lengths: tuple[int, ...] = (4096, 16384, 65536)
    kernel_heads: int = 12
    kernel_head_dim: int = 64
    kernel_rows: int = 512
    train_steps: int = 20
    train_batch: int = 8
    train_max_len: int | None = None  # None: each preset's own
    pretrain_steps: int = 200
    sections: tuple[str, ...] = SECTIONS
    tests_dir: Path | None = None
    budgets: dict[str, float] = field(default_factory=lambda: dict(GPU_BUDGETS))


def gpu_plan(lengths: tuple[int, ...] = (4096, 8192, 16384, 32768, 65536)) -> CheckPlan:
    base = BenchSize(vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072)
    return CheckPlan(speed=SpeedPlan(size=base, lengths=lengths),
                     published=SpeedPlan(size=replace(base, vocab_size=4096), lengths=(4096, 16384)),
                     utilisation=UtilisationPlan(size=base, lengths=(4096, 16384, 65536), batches=(1, 4, 16),
                                                 context_lengths=tuple(2**k for k in range(16, 21))))


def cpu_plan() -> CheckPlan:
    tiny = BenchSize(vocab_size=512, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64)
    return CheckPlan(device=torch.device("cpu"), kernel_lengths=(512,), kernel_heads=2, kernel_head_dim=16,
                     kernel_rows=32, train_steps=8, train_batch=2, train_max_len=512, pretrain_steps=2,
                     speed=SpeedPlan(size=tiny, lengths=(1024,), repeats=1),  # transformers' block_sparse from 704 tokens
                     published=SpeedPlan(size=tiny, lengths=(2048,), repeats=1),  # NT v2 made long from 2,048
                     utilisation=UtilisationPlan(size=tiny, lengths=(1024,), batches=(1, 2),
                                                 context_lengths=(2048, 4096), repeats=1),
                     budgets=dict(CPU_BUDGETS))


def section_tests(plan: CheckPlan, out: Path, say) -> list[dict]:
    """``pytest -m gpu`` over the checkout's tests; one row with the counts pytest printed."""
    if plan.tests_dir is None or not plan.tests_dir.is_dir():
        return [{"check": "gpu tests", "ok": None, "status": "skipped: no tests directory (run from a source "
                 "checkout or pass --tests)"}]
    done = run_module("pytest", ["-m", "gpu", "-q", "-p", "no:cacheprovider", plan.tests_dir], cwd=plan.tests_dir)
    summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    (out / "gpu_tests.log").write_text(done.stdout + done.stderr)
    say(f"  pytest -m gpu: {summary}")
    return [{"check": "gpu tests", "ok": done.returncode == 0, "status": summary}]


def section_kernels(plan: CheckPlan, out: Path, say) -> Iterator[dict]:
    """flex (on CUDA) against the dense float64 reference, forward and backward (:mod:`.kernel_check`)."""
    path = "flex" if plan.device.type == "cuda" else "gather"  # flex has no backward on CPU
    for length in plan.kernel_lengths:
        for backbone in BACKBONES:
            for dtype in (torch.bfloat16, torch.float32):
                case = KernelCase(backbone, length, dtype, plan.kernel_heads, plan.kernel_head_dim)
                try:
                    row = check_case(case, plan.device, path, rows=plan.kernel_rows)
                except torch.OutOfMemoryError:
                    row = {"backbone": backbone, "tokens": length, "dtype": str(dtype), "ok": False, "status": "oom"}
                row["check"] = "kernel"
                say(f"  {backbone:>10} {row['tokens']:>6} {row['dtype']:>8} {path}: "
                    + (f"out {row['out_error']:.1e} grad {row['grad_error']:.1e} (tol {row['tolerance']:.0e}) "
                       f"{'ok' if row['ok'] else 'FAIL'} {row['seconds']:.2f} s" if "out_error" in row else "oom"))
                release(plan.device)
                yield row


def section_train(plan: CheckPlan, out: Path, say) -> Iterator[dict]:
    """Each backbone's tiny preset trains ``train_steps`` AdamW steps on a fixed batch of real DNA (one token
    per base) under bf16 autocast on CUDA (float32 on CPU); its loss must fall by a quarter."""
    # imported here: a failing model or training stack fails this section, not the whole check
    from genolong.model.modeling import GenolongForMaskedLM
    from genolong.training.pretrain import load_pretrain_config

    for backbone in available_attentions():
        preset = backbone if backbone in ("vcc", "sled") else "tiny"  # tiny-sized presets; the others are base-sized
        max_len = {"max_len": plan.train_max_len} if plan.train_max_len else {}
        config = load_pretrain_config(preset, {"model.backbone": backbone} | max_len)
        torch.manual_seed(0)
        model = GenolongForMaskedLM(config.model_config(TRAIN_VOCAB)).to(plan.device).train()
        inputs, labels = _dna_batch(plan.train_batch, config.max_len, plan.device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        started = time.perf_counter()
        for _ in range(plan.train_steps):
            with torch.autocast(plan.device.type, dtype=torch.bfloat16, enabled=plan.device.type == "cuda"):
                loss = model(input_ids=inputs, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
        seconds = time.perf_counter() - started
        ok = all(map(math.isfinite, losses)) and losses[-1] < 0.75 * losses[0]
        say(f"  {backbone:>10}: loss {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps, "
            f"{seconds:.1f} s {'ok' if ok else 'FAIL'}")
        del model, optimizer
        release(plan.device)
        yield {"check": "train", "backbone": backbone, "max_len": config.max_len, "first_loss": losses[0],
               "last_loss": losses[-1], "steps": len(losses), "seconds": seconds, "ok": ok}


def _dna_batch(batch: int, max_len: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Real DNA from the shipped sample, one token per base (ids 5-9), 15% masked: (inputs, labels)."""
    from genolong.resources import sample_genome

    text = clean("".join(record.sequence for record in read_fasta(sample_genome())))
    ids = torch.tensor([5 + "ACGTN".index(base) for base in text[: batch * max_len]]).view(batch, max_len)
    ids[:, 0] = 2  # [CLS]
    generator = torch.Generator().manual_seed(0)
    masked = torch.rand(ids.shape, generator=generator) < 0.15
    masked[:, 0] = False
    return ids.masked_fill(masked, 4).to(device), torch.where(masked, ids, -100).to(device)


def section_pretrain(plan: CheckPlan, out: Path, say) -> list[dict]:
    """``genolong pretrain`` of the shipped sample (tiny preset) on this device, in a child process:
    a finite validation BPC."""
    run_dir = out / "pretrain"
    accelerator = "gpu" if plan.device.type == "cuda" else "cpu"
    arguments = ["pretrain", "--out", run_dir, "--accelerator", accelerator, "--max-steps", plan.pretrain_steps,
                 "--set", f"train.val_every_steps={plan.pretrain_steps}"]
    started = time.perf_counter()
    done = run_genolong(arguments, cwd=out)  # cwd: no checkout shadows the package
    seconds = time.perf_counter() - started
    (out / "pretrain.log").write_text(done.stdout + done.stderr)
    report = run_dir / "report.json"
    data = json.loads(report.read_text()) if done.returncode == 0 and report.exists() else {}
    ok = done.returncode == 0 and math.isfinite(data.get("val_bpc", float("nan")))
    row = {"check": "pretrain", "ok": ok, "exit": done.returncode, "seconds": seconds, "steps": data.get("steps"),
           "val_bpc": data.get("val_bpc"), "unigram_bpc": data.get("unigram_bpc"),
           "tokens_per_s": data.get("train_tokens_per_s"), "command": " ".join(["genolong", *child_arguments(arguments)])}
    say(f"  exit {done.returncode}, {seconds:.0f} s, val {row['val_bpc']} bits/bp, {row['tokens_per_s']} tokens/s")
    return [row]


def section_inference(plan: CheckPlan, out: Path, say) -> list[dict]:
    """predict, scan and score-variants on the device against the CPU (:mod:`.device_inference`)."""
    return compare_inference(out / "inference", plan.device, say)


def section_speed(plan: CheckPlan, out: Path, say) -> Iterator[dict]:
    """Speed and memory of ours against transformers' BigBird and dense SDPA (:mod:`.device_speed`)."""
    for row in run_speed(plan.speed, plan.device, say=lambda line: say("  " + line)):
        yield row | {"check": "speed"}


def section_published(plan: CheckPlan, out: Path, say) -> Iterator[dict]:
    """The speed rows of the published models; a model that fails to build or run (its conversion
    broke) is a failed check, running out of memory is a measurement."""
    for row in run_speed(plan.published, plan.device, models=tuple(PUBLISHED), say=lambda line: say("  " + line)):
        yield row | {"check": "published", "ok": not row["status"].startswith("error")}


def section_utilisation(plan: CheckPlan, out: Path, say) -> Iterator[dict]:
    """Model FLOPs, TFLOP/s and MFU of base-size training steps, and the longest context one step fits
    (:mod:`.device_utilisation`)."""
    return run_utilisation(plan.utilisation, plan.device, say)


SECTION_FUNCTIONS: dict[str, Callable] = {
    "tests": section_tests, "kernels": section_kernels, "train": section_train, "pretrain": section_pretrain,
    "inference": section_inference,
    "speed": section_speed, "published": section_published, "utilisation": section_utilisation,
}


def machine(device: torch.device) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "cpu_cores": os.cpu_count()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                 "cuda": torch.version.cuda}
    return info | {"transformers": transformers.__version__}


def run_check(plan: CheckPlan, out: Path, say: Callable[[str], None] = print) -> dict:
    """Run the sections of ``plan`` into ``out``, each in its own process within its budget
    (:func:`~genolong.experiments.bench.section_runner.run_section`); returns (and writes) the results."""
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("genolong").setLevel(logging.WARNING)
    results = {"date": time.strftime("%Y-%m-%d"), "machine": machine(plan.device),
               "command": " ".join(["genolong", *sys.argv[1:]]), "budgets": plan.budgets, "sections": {}}
    for name in plan.sections:
        budget = plan.budgets[name]
        say(f"[{name}] (budget {budget:g} s)")
        started = time.perf_counter()
        rows = run_section(name, SECTION_FUNCTIONS[name], plan, out, budget, say)
        results["sections"][name] = {"seconds": round(time.perf_counter() - started, 1), "budget_s": budget,
                                     "rows": rows}
        atomic_write_text(out / "device_check.json", json.dumps(results, indent=1, default=str) + "\n")
    atomic_write_text(out / "device_check.md", markdown(results))
    return results


def failures(results: dict) -> list[str]:
    """One line per failed check (a check with ``ok`` False; speed rows are measurements, not checks; a
    section stopped at its budget is listed by :func:`stopped`)."""
    lines = []
    for name, section in results["sections"].items():
        for row in section["rows"]:
            if row.get("ok") is False:
                what = {k: row[k] for k in ("backbone", "tokens", "dtype", "tool", "status") if k in row}
                lines.append(f"{name}: {what}")
    return lines


def stopped(results: dict) -> list[str]:
    """One line per section stopped at its budget: its checks and measurements are incomplete."""
    return [f"{name}: {row['status']}" for name, section in results["sections"].items()
            for row in section["rows"] if str(row.get("status", "")).startswith("stopped")]
