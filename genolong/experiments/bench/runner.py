"""``genolong bench attention``: a fresh worker process (:mod:`genolong.experiments.bench.attention`) per
model and length, killed past a memory cap or a time limit, rows saved after each pair so that a run
resumes, then the report (:mod:`genolong.experiments.bench.report`)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
import transformers

from genolong.attention import attention_class, available_attentions
from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text
from genolong.core.memory import proc_status_mb
from genolong.experiments.bench import attention
from genolong.experiments.bench import report as bench_report
from genolong.experiments.bench.attention import ALL_PEERS, FLOOR, LEGACY_PEERS, PEERS, BenchSize, Spec
from genolong.runtime.cpu_bf16 import matmul_rates
from genolong.runtime.precision import cpu_info


def run_spec(spec: Spec, timeout_s: float, max_memory_gb: float) -> list[dict[str, Any]]:
    """Run ``spec`` in a fresh process, killed past ``max_memory_gb`` resident or ``timeout_s``; a row
    per phase, with a status for phases that did not finish."""
    env = {**os.environ, "OMP_NUM_THREADS": str(spec.threads), "TOKENIZERS_PARALLELISM": "false"}
    legacy = spec.model in LEGACY_PEERS
    if legacy and not spec.legacy_site:
        rows, status = [], "skipped: needs --legacy-site (a directory with transformers 4.x)"
    else:
        if legacy:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [spec.legacy_site, env.get("PYTHONPATH")]))
        rows, status = _run_worker(spec, env, timeout_s, max_memory_gb)
    done = {row["phase"] for row in rows}
    rows += [{"phase": phase, "status": status} for phase in spec.phases if phase not in done]
    for row in rows:
        row.update(model=spec.model, length=spec.length, dtype=spec.dtype, threads=spec.threads)
    return rows


def _run_worker(spec: Spec, env: dict[str, str], timeout_s: float,
                max_memory_gb: float) -> tuple[list[dict[str, Any]], str | None]:
    """The rows the worker printed, and why it stopped early (None when it finished)."""
    argv = [sys.executable, "-m", "genolong.experiments.bench.attention", json.dumps(asdict(spec))]
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True, env=env,
                                   preexec_fn=_die_with_parent)
        start, status = time.monotonic(), None
        while process.poll() is None:
            with contextlib.suppress(FileNotFoundError, KeyError, ProcessLookupError):
                if proc_status_mb("VmRSS", process.pid) > max_memory_gb * 1024:
                    status = f"killed: resident set over {max_memory_gb:g} GB"
            if status is None and time.monotonic() - start > timeout_s:
                status = f"killed: over {timeout_s:g} s"
            if status:
                process.kill()
                process.wait()
                break
            time.sleep(0.05)
        stdout.seek(0)
        stderr.seek(0)
        rows = [json.loads(line) for line in stdout if line.startswith("{")]
        errors = [line.strip() for line in stderr if line.strip()]
    if status is None and process.returncode != 0:
        status = f"failed: {errors[-1] if errors else f'exit code {process.returncode}'}"
    return rows, status


def _die_with_parent() -> None:
    """In the worker, before exec: Linux sends it SIGKILL when the benchmark process dies."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def plan(backbones: list[str], peers: list[str], floor: bool, lengths: list[int],
         extra_lengths: list[int]) -> list[tuple[str, int]]:
    """(model, length) pairs, length-major (models compared at one length are measured close in
    time): everyone at ``lengths``; our sparse backbones and the floor also at ``extra_lengths``."""
    models = [*backbones, *([FLOOR] if floor else []), *peers]
    long_models = [m for m in models if m not in ALL_PEERS and m != "full"]
    pairs = [(model, length) for length in lengths for model in models]
    pairs += [(model, length) for length in extra_lengths if length not in lengths for model in long_models]
    return pairs


def check_plan(pairs: list[tuple[str, int]], size: BenchSize) -> None:
    """Raise :class:`ConfigError` for a pair of ours that cannot be built, before any measurement."""
    for model, length in pairs:
        if model not in ALL_PEERS:
            attention.genolong_config("full" if model == FLOOR else model, size, length)


def run_benchmark(pairs: list[tuple[str, int]], template: Spec, csv_path: Path, *, timeout_s: float,
                  max_memory_gb: float, resume: bool = False,
                  progress: Callable[[dict[str, Any]], None] = lambda row: None) -> list[dict[str, Any]]:
    """Measure every (model, length) pair in its own process, rewriting ``csv_path`` after each;
    with ``resume``, the pairs already in ``csv_path`` are kept."""
    rows = bench_report.read_csv(csv_path) if resume and csv_path.exists() else []
    done = {(row["model"], row["length"]) for row in rows}
    for model, length in [pair for pair in pairs if pair not in done]:
        for row in run_spec(replace(template, model=model, length=length), timeout_s, max_memory_gb):
            progress(row)
            rows.append(row)
        bench_report.write_csv(csv_path, rows)
    return rows


def resolve_models(backbones: list[str] | None, peers: list[str] | None, legacy_site: Path | None
                   ) -> tuple[list[str], list[str]]:
    """Our backbones (None: every registered attention) and the peers (None: every peer that can run here,
    the transformers-4.x ones only with ``legacy_site``); an unknown name or a ``legacy_site`` without
    transformers is a UserError."""
    backbones = available_attentions() if backbones is None else backbones
    for name in backbones:
        attention_class(name)  # ConfigError for an unknown name
    if peers is None:
        peers = list(PEERS + (LEGACY_PEERS if legacy_site else ()))
    unknown = sorted(set(peers) - set(ALL_PEERS))
    if unknown:
        raise UserError(f"unknown peer {', '.join(unknown)}; choose from: {', '.join(ALL_PEERS)}")
    if legacy_site is not None and not (legacy_site / "transformers").is_dir():
        raise UserError(f"--legacy-site {legacy_site}: no transformers package in that directory")
    return backbones, peers


def machine() -> dict[str, Any]:
    """The CPU, its cores, the Python / torch / transformers versions and the measured fp32 GEMM rate."""
    return {"cpu": cpu_info()[0], "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "fp32_gemm_gflops": round(matmul_rates().fp32, 1)}


def format_row(row: dict[str, Any]) -> str:
    """One measured phase as a progress line, or why it is missing."""
    where = f"  {row['model']:>14} {row['length']:>6} {row['phase']:>7}"
    if row.get("status") != "ok":
        return f"{where}: {row['status']}"
    return (f"{where}: {row['time_s']:8.3f} s  peak {row['peak_mb']:8.0f} MB  "
            f"(first call {row['first_call_s']:.2f} s, load {row['load1']:.1f})")


def run_attention_benchmark(out: Path, template: Spec, *, backbones: list[str] | None = None,
                            peers: list[str] | None = None, floor: bool = True, lengths: list[int],
                            extra_lengths: list[int], timeout_s: float, max_memory_gb: float,
                            resume: bool = False, say: Callable[[str], None] = print) -> Path:
    """Measure the models of :func:`plan` with the settings of ``template`` and write
    ``OUT/attention_DTYPE`` .csv (rewritten after each pair), .md, .png and .json (settings, machine,
    command, load); returns that stem. ``say`` receives the progress lines and the report. Unknown
    names, an impossible configuration or ``resume`` over other settings raise before measuring."""
    backbones, peers = resolve_models(backbones, peers, None if template.legacy_site is None
                                      else Path(template.legacy_site))
    stem = out / f"attention_{template.dtype}"
    settings = {"size": asdict(template.size), "threads": template.threads, "repeats": template.repeats,
                "budget_s": template.budget_s, "dtype": template.dtype}
    meta_path = stem.with_suffix(".json")
    if resume and meta_path.exists() and json.loads(meta_path.read_text())["settings"] != settings:
        raise UserError(f"{meta_path} was measured with other settings; use another --out or drop --resume")
    meta = {"settings": settings, "command": " ".join(["genolong", *sys.argv[1:]]), "machine": machine(),
            "load_average_start": os.getloadavg()}
    pairs = plan(backbones, peers, floor, lengths, extra_lengths)
    check_plan(pairs, template.size)
    say(f"{len(pairs)} model/length pairs, {template.threads} threads, {template.dtype}, "
        f"size {asdict(template.size)}; load average {os.getloadavg()[0]:.2f}")
    rows = run_benchmark(pairs, template, stem.with_suffix(".csv"), timeout_s=timeout_s,
                         max_memory_gb=max_memory_gb, resume=resume, progress=lambda row: say(format_row(row)))
    meta["load_average_end"] = os.getloadavg()
    atomic_write_text(meta_path, json.dumps(meta, indent=2) + "\n")
    report = bench_report.markdown_report(rows)
    atomic_write_text(stem.with_suffix(".md"), report)
    size = template.size
    title = (f"{size.num_hidden_layers} layers, hidden {size.hidden_size}, {size.num_attention_heads} heads, "
             f"FFN {size.intermediate_size}; batch 1, {template.threads} threads, {template.dtype}")
    bench_report.plot(stem.with_suffix(".png"), rows, title)
    say(report)
    return stem
