"""Backbone comparison and the context-length ablation under one budget.

``run_comparison`` pretrains every backbone with MLM under one budget and fine-tunes each on the
same promoters; ``run_context_ablation`` pretrains one model at several window lengths with the
same tokens per step (BigBird App. F, Fig. 8). Both share one output directory (their tables and
plots: ``docs/guide/compare-benchmark.md``)::

    out/tokenizer/, out/corpus/         trained once, shared by every run
    out/backbones/<name>/pretrain/      a `genolong pretrain` run directory
    out/backbones/<name>/finetune/      a `genolong promoter finetune` run directory
    out/backbones/<name>/result.json    the comparison row (a finished backbone is skipped)
    out/context/<name>_<len>/           the ablation's pretrain runs (pretrain/, pretrain.json)

Every stage resumes from its last checkpoint when the command is run again with the same arguments.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genolong.attention import available_attentions
from genolong.config import from_dict, to_dict
from genolong.config.presets import merge_preset, read_preset, resolve_preset
from genolong.configs import preset_path
from genolong.core.errors import ConfigError, UserError
from genolong.core.files import atomic_write_text, claim_directory
from genolong.core.memory import proc_status_mb, reset_peak_memory
from genolong.datasets.corpus import Corpus
from genolong.datasets.mlm import MaskingConfig, MLMWindows, SpecialIds
from genolong.dna.tokenizer import load_tokenizer
from genolong.evaluation.compare_report import write_ablation, write_comparison
from genolong.model.configuration import check_model_fields
from genolong.model.loading import load_model
from genolong.model.modeling import GenolongModel
from genolong.runtime.devices import cuda_available, resolve_device
from genolong.tasks.promoter import PROMOTER
from genolong.tasks.task import FinetuneConfig
from genolong.training.finetune import run_finetune
from genolong.training.pretrain import PretrainConfig, _prepare_tokenizer, logged_rows, run_pretrain

log = logging.getLogger(__name__)

#: comparison.csv columns (:data:`~genolong.evaluation.compare_report.COLUMNS`) that repeat exactly
#: with the same seed on the same machine (the others are timings and memory).
DETERMINISTIC = ("backbone", "parameters", "max_len", "pretrain_steps", "val_bpc", "unigram_bpc",
                 "finetune_steps", "promoter_f1", "promoter_auroc", "promoter_mcc", "kmer_f1")


@dataclass
class AblationConfig:
    """The context-length ablation: ``max_len`` takes each of ``lengths`` with ``tokens_per_step``
    tokens per optimizer step for the same number of steps; validation covers ``val_tokens``."""

    lengths: list[int] = field(default_factory=lambda: [512, 1024, 2048, 4096])
    tokens_per_step: int = 8192
    val_tokens: int = 32768
    backbones: list[str] = field(default_factory=lambda: ["bigbird"])

    def __post_init__(self) -> None:
        for length in self.lengths:
            if length < 8 or self.tokens_per_step % length or self.val_tokens < length:
                raise ConfigError(f"ablation length {length}: needs 8 <= length, tokens_per_step "
                                  f"({self.tokens_per_step}) a multiple of it and val_tokens ({self.val_tokens}) "
                                  "at least one window")
        _check_names(self.backbones, "ablation.backbones")


@dataclass
class CompareConfig:
    """A comparison preset (``configs/compare/``): the shared ``pretrain`` and promoter ``finetune``
    presets (the backbone set per run), each backbone's own attention parameters in the order tables
    list them, and the inference windows and batch that give ``infer_windows_per_s``."""

    pretrain: dict[str, Any] = field(default_factory=lambda: {"extends": "tiny"})
    finetune: dict[str, Any] = field(default_factory=lambda: {"extends": "promoter_pretrained"})
    backbones: dict[str, dict[str, Any]] = field(default_factory=lambda: {name: {} for name in available_attentions()})
    inference_windows: int = 32
    inference_batch_size: int = 8
    ablation: AblationConfig = field(default_factory=AblationConfig)

    def __post_init__(self) -> None:
        _check_names(self.backbones, "backbones")
        for name, params in self.backbones.items():
            check_model_fields({"backbone": name} | params, prefix=f"backbones.{name}.")
        if self.inference_windows < 1 or self.inference_batch_size < 1:
            raise ConfigError("inference_windows and inference_batch_size must be >= 1")
        missing = sorted(set(self.ablation.backbones) - set(self.backbones))
        if missing:
            raise ConfigError(f"ablation.backbones {', '.join(missing)} have no parameters under backbones:")

    def pretrain_config(self, backbone: str, seed: int, **changes: Any) -> PretrainConfig:
        """The shared pretraining config with ``backbone`` and its parameters; ``changes``
        sets top-level fields or ``train`` fields (``max_len=``, ``batch_size=``, ...)."""
        data = merge_preset(resolve_preset("pretrain", self.pretrain),
                            {"model": {"backbone": backbone} | self.backbones[backbone]})
        data.setdefault("train", {})["seed"] = seed
        for key, value in changes.items():
            (data if key == "max_len" else data["train"])[key] = value
        return from_dict(PretrainConfig, data, source=f"compare pretrain ({backbone})")

    def finetune_config(self, backbone: str, seed: int) -> FinetuneConfig:
        data = merge_preset(resolve_preset("finetune", self.finetune), {"model": {"backbone": backbone}})
        data.setdefault("train", {})["seed"] = seed
        config = from_dict(FinetuneConfig, data, source=f"compare finetune ({backbone})")
        if config.task != PROMOTER.name:
            raise ConfigError(f"the comparison fine-tunes promoters, not {config.task}")
        return config


def _check_names(names, where: str) -> None:
    known = available_attentions()
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown backbone(s) {', '.join(unknown)}; known: {', '.join(known)}")


def load_compare_config(preset: str | Path) -> CompareConfig:
    """A shipped comparison preset (``micro``, ``tiny``, ``small``, ``base``) or a YAML file."""
    source = preset_path("compare", str(preset))
    config = from_dict(CompareConfig, read_preset(source), source=str(source))
    for backbone in config.backbones:  # the pretrain: and finetune: sections, checked before any run
        try:
            config.pretrain_config(backbone, seed=0)
            config.finetune_config(backbone, seed=0)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err.message}", hint=err.hint) from None
    return config


def parse_backbones(text: str | None, config: CompareConfig) -> list[str]:
    """``full,bigbird`` -> the names, checked against the preset, in the preset's order;
    None -> every backbone of the preset."""
    if text is None:
        return list(config.backbones)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise UserError("--backbones is empty")
    unknown = [name for name in names if name not in config.backbones]
    if unknown:
        raise UserError(f"unknown backbone(s) {', '.join(unknown)}; this preset has: {', '.join(config.backbones)}")
    return [name for name in config.backbones if name in names]


@contextmanager
def peak_memory() -> Iterator[dict[str, float | None]]:
    """``{"mb": ...}``, set at the end of the block to its peak memory above the memory in use when it
    started: CUDA allocator peak on a GPU, else the resident-set high-water mark (Linux; None elsewhere)."""
    cuda, peak = cuda_available(), {"mb": None}
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    try:
        base = torch.cuda.memory_allocated() / 2**20 if cuda else reset_peak_memory()
    except OSError:
        base = None
    yield peak
    if base is not None:
        end = torch.cuda.max_memory_allocated() / 2**20 if cuda else proc_status_mb("VmHWM")
        peak["mb"] = round(end - base, 1)


def inference_rate(model_dir: Path, corpus_dir: Path, max_len: int, windows: int, batch_size: int) -> float:
    """Encoder forward passes (no grad, eval mode) over ``windows`` validation windows of
    ``max_len`` tokens: windows per second, after one untimed batch."""
    device = resolve_device("auto")
    dataset = MLMWindows(Corpus(corpus_dir), "valid", SpecialIds.from_tokenizer(load_tokenizer(model_dir)),
                         max_len, MaskingConfig())
    chosen = np.linspace(0, len(dataset) - 1, windows).round().astype(int)
    tokens = [torch.as_tensor(dataset.tokens(int(i))) for i in chosen]
    input_ids = torch.nn.utils.rnn.pad_sequence(tokens, batch_first=True).to(device)
    mask = torch.stack([torch.arange(input_ids.shape[1]) < len(t) for t in tokens]).long().to(device)
    model = load_model(GenolongModel, model_dir, dropped={"lm_head."}).to(device)
    with torch.inference_mode():
        model(input_ids=input_ids[:batch_size], attention_mask=mask[:batch_size])
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for ids, batch_mask in zip(input_ids.split(batch_size), mask.split(batch_size), strict=True):
            model(input_ids=ids, attention_mask=batch_mask)
        if device.type == "cuda":
            torch.cuda.synchronize()
    return round(len(tokens) / (time.perf_counter() - started), 2)


def device_name() -> str:
    return torch.cuda.get_device_name() if cuda_available() else f"cpu x{torch.get_num_threads()}"


@dataclass
class Workspace:
    """The inputs and the shared output directory of a comparison or ablation."""

    genome: Path
    out: Path
    config: CompareConfig
    seed: int = 0
    show_progress: bool = True

    def prepare(self) -> None:
        """Train the shared tokenizer (once) from the shared pretraining settings."""
        if not self.genome.is_file():
            raise UserError(f"{self.genome}: no such genome file")
        claim_directory(self.out, "compare")
        any_backbone = next(iter(self.config.backbones))  # the tokenizer settings are shared
        _prepare_tokenizer(self.genome, None, self.out, self.config.pretrain_config(any_backbone, self.seed))

    def pretrain(self, run_dir: Path, config: PretrainConfig) -> dict[str, Any]:
        """A resumable pretraining run on the shared tokenizer and corpus into ``run_dir/pretrain``:
        ``{"report": its report, "peak_mb": ..., "device": ...}``, kept in ``run_dir/pretrain.json``
        (a finished run is read back from there)."""
        path, identity = run_dir / "pretrain.json", identity_hash(str(self.genome.resolve()), to_dict(config))
        if (saved := load_result(path, identity)) is not None:
            return saved
        with peak_memory() as peak:
            report = run_pretrain(self.genome, run_dir / "pretrain", config, resume=True,
                                  tokenizer_dir=self.out / "tokenizer", corpus_dir=self.out / "corpus",
                                  show_progress=self.show_progress)
        if "stopped_at_step" in report:
            raise Interrupted(run_dir)
        result = {"report": report, "peak_mb": peak["mb"], "device": device_name()}
        save_result(path, identity, result)
        return result


class Interrupted(Exception):
    """A run stopped before its last step (Ctrl-C in Lightning); its checkpoints stay."""


def identity_hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_result(path: Path, identity: str) -> Any | None:
    """What ``save_result`` stored at ``path`` with ``identity``; None when absent. A result made
    with other settings is a UserError (never overwritten)."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved.get("identity") != identity:
        raise UserError(f"{path} was made with other settings", hint="use another --out (nothing was overwritten)")
    log.info("%s: finished earlier, not rerun", path)
    return saved["result"]


def save_result(path: Path, identity: str, result: Any) -> None:
    atomic_write_text(path, json.dumps({"identity": identity, "result": result}, indent=1) + "\n")


def compare_backbone(space: Workspace, promoters: Path, backbone: str) -> dict[str, Any]:
    """Pretrain, measure and fine-tune one backbone; its comparison row (also in result.json)."""
    pretrain_config = space.config.pretrain_config(backbone, space.seed)
    finetune_config = space.config.finetune_config(backbone, space.seed)
    run_dir = space.out / "backbones" / backbone
    identity = identity_hash(str(space.genome.resolve()), str(promoters.resolve()), to_dict(pretrain_config),
                             to_dict(finetune_config), space.config.inference_windows)
    if (row := load_result(run_dir / "result.json", identity)) is not None:
        return row
    log.info("%s: pretraining", backbone)
    pretrained = space.pretrain(run_dir, pretrain_config)
    pretrain = pretrained["report"]
    model_dir = run_dir / "pretrain" / "model"
    rate = inference_rate(model_dir, space.out / "corpus", pretrain_config.max_len,
                          space.config.inference_windows, space.config.inference_batch_size)
    log.info("%s: fine-tuning on %s", backbone, promoters)
    finetune = run_finetune(promoters, run_dir / "finetune", finetune_config, pretrained=model_dir, resume=True,
                            show_progress=space.show_progress)
    if "stopped_at_step" in finetune:
        raise Interrupted(run_dir)
    test = finetune["test"]
    row = {
        "backbone": backbone, "parameters": pretrain["parameters"], "max_len": pretrain_config.max_len,
        "pretrain_steps": pretrain["steps"], "train_tokens_per_s": pretrain.get("train_tokens_per_s"),
        "train_peak_mb": pretrained["peak_mb"], "val_bpc": round(pretrain["val_bpc"], 5),
        "unigram_bpc": round(pretrain["unigram_bpc"], 5), "finetune_steps": finetune["steps"],
        "promoter_f1": round(test["f1"], 5), "promoter_auroc": round(test["auroc"], 5),
        "promoter_mcc": round(test["mcc"], 5),
        "kmer_f1": round(finetune["kmer_baseline"]["test"]["f1"], 5) if "kmer_baseline" in finetune else None,
        "infer_windows_per_s": rate, "pretrain_s": pretrain["seconds"], "finetune_s": finetune["seconds"],
        "device": device_name()}
    save_result(run_dir / "result.json", identity, row)
    return row


def ablation_run(space: Workspace, backbone: str, max_len: int) -> dict[str, Any]:
    """One context length of the ablation (``out/context/<backbone>_<max_len>/``): its row."""
    ablation = space.config.ablation
    batch_size = ablation.tokens_per_step // max_len
    config = space.config.pretrain_config(backbone, space.seed, max_len=max_len, batch_size=batch_size,
                                          val_windows=max(1, ablation.val_tokens // max_len))
    log.info("context ablation: %s at %d tokens (batch %d)", backbone, max_len, batch_size)
    pretrained = space.pretrain(space.out / "context" / f"{backbone}_{max_len}", config)
    report = pretrained["report"]
    return {"backbone": backbone, "max_len": max_len, "batch_size": batch_size, "steps": report["steps"],
            "tokens_seen": report["steps"] * batch_size * config.train.accumulate_grad_batches * max_len,
            "val_bpc": round(report["val_bpc"], 5), "unigram_bpc": round(report["unigram_bpc"], 5),
            "gain_bpc": round(report["unigram_bpc"] - report["val_bpc"], 5),
            "train_tokens_per_s": report.get("train_tokens_per_s"), "pretrain_s": report["seconds"],
            "device": pretrained["device"]}


def validation_curve(run_dir: Path, row: dict[str, Any], tokens_per_step: float) -> list[dict]:
    """Validation BPC against step of the pretraining run in ``run_dir/pretrain`` (run ``run_dir.name``):
    rows of :data:`~genolong.evaluation.compare_report.CURVE_COLUMNS`. Lightning logs the validation
    after optimizer step N as step N - 1."""
    return [
        {"run": run_dir.name, "backbone": row["backbone"], "max_len": row["max_len"],
         "step": int(logged["step"]) + 1, "tokens_seen": round((int(logged["step"]) + 1) * tokens_per_step),
         "val_bpc": float(logged["val/bpc"])}
        for logged in logged_rows(run_dir / "pretrain") if logged.get("val/bpc")
    ]


def run_comparison(space: Workspace, promoters: Path, backbones: list[str]) -> list[dict[str, Any]]:
    """Every backbone in turn (finished ones are read back), then the tables and plots."""
    if not (promoters / "manifest.json").is_file():
        raise UserError(f"{promoters}: not a promoter dataset (no manifest.json)",
                        hint="build one with `genolong promoter prepare`")
    space.prepare()
    rows = [compare_backbone(space, promoters, name) for name in backbones]
    train = space.config.pretrain_config(backbones[0], space.seed).train
    tokens_per_step = train.batch_size * train.accumulate_grad_batches * rows[0]["max_len"]
    curves = [point for row in rows
              for point in validation_curve(space.out / "backbones" / row["backbone"], row, tokens_per_step)]
    write_comparison(space.out, rows, curves)
    return rows


def run_context_ablation(space: Workspace, backbones: list[str], lengths: list[int]) -> list[dict[str, Any]]:
    """Every (backbone, length) pretraining in turn, then the table and plot."""
    replace(space.config.ablation, lengths=lengths, backbones=backbones)  # validates them
    space.prepare()
    rows = [ablation_run(space, name, length) for name in backbones for length in lengths]
    curves = [point for row in rows for point in validation_curve(
        space.out / "context" / f"{row['backbone']}_{row['max_len']}", row,
        row["tokens_seen"] / row["steps"])]
    write_ablation(space.out, rows, curves)
    return rows
