"""MLM pretraining (BigBird Sec. 5, App. F.1): tokenizer -> corpus -> Lightning training, into one
output directory, skipping the steps whose outputs exist and match::

    out/tokenizer/        (unless --tokenizer is given)
    out/corpus/           document shards (genolong.datasets.corpus)
    out/checkpoints/      Lightning checkpoints (every N steps, last.ckpt)
    out/logs/             csv/version_N/metrics.csv (one version per start), tensorboard/
    out/model/            the final model (save_pretrained) with its tokenizer
    out/report.json       validation loss and bits per base pair, baseline, throughput
    out/learning_curve.png

Bits per base pair (BPC): the masked tokens' total NLL in bits over the base pairs they cover, beside
a token-unigram model's on the same tokens. No NSP (RoBERTa showed it does not help MLM).
"""

from __future__ import annotations

import csv
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader

from genolong.attention import attention_class
from genolong.config import from_dict, to_dict
from genolong.config.presets import apply_overrides, read_preset
from genolong.configs import preset_path
from genolong.core.errors import ConfigError, UserError
from genolong.core.files import atomic_path, atomic_write_text, claim_directory
from genolong.datasets.corpus import Corpus
from genolong.datasets.corpus_build import CorpusConfig, build_corpus
from genolong.datasets.mlm import MaskingConfig, MLMWindows, SpecialIds, collate_windows
from genolong.dna.tokenizer import (
    METADATA_FILE,
    TokenizerTrainConfig,
    load_tokenizer,
    token_lengths,
    tokenizer_fingerprint,
    train_tokenizer,
)
from genolong.model.configuration import GenolongConfig
from genolong.model.loading import save_model
from genolong.model.modeling import GenolongForMaskedLM
from genolong.model.section import ModelSection
from genolong.runtime.launch import global_rank, world_size
from genolong.tasks.settings import TrainConfig
from genolong.training.base import StepIndexedData, TrainingModule, check_run_identity
from genolong.training.checkpoints import resume_checkpoint
from genolong.training.common import build_trainer
from genolong.training.stopping import after_training, fit

log = logging.getLogger(__name__)
LN2 = math.log(2.0)


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on; a YAML preset fills it (configs/pretrain/).

    Attributes:
        max_len: tokens per window, [CLS] and [SEP] included (BigBird: 4096).
        model: ``GenolongConfig`` fields; ``vocab_size`` comes from the tokenizer,
            ``max_position_embeddings`` defaults to max_len.
    """

    max_len: int = 4096
    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerTrainConfig = field(default_factory=TokenizerTrainConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.max_len < 8:
            raise ConfigError(f"max_len must be >= 8, got {self.max_len}")
        self.model_config(self.model.settings.get("vocab_size", self.tokenizer.vocab_size))  # the model's checks

    def model_config(self, vocab_size: int) -> GenolongConfig:
        """The validated ``GenolongConfig`` for a tokenizer of ``vocab_size`` tokens."""
        config = self.model.genolong_config(max_len=self.max_len, vocab_size=vocab_size)
        multiple = attention_class(config.backbone).length_multiple(config)
        if self.max_len % multiple:
            raise ConfigError(f"max_len={self.max_len} is not a multiple of {multiple}, the block size of "
                              f"backbone {config.backbone!r}")
        if self.max_len > config.max_position_embeddings:
            raise ConfigError(f"max_len={self.max_len} exceeds max_position_embeddings="
                              f"{config.max_position_embeddings}")
        return config


def load_pretrain_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> PretrainConfig:
    """A YAML file (``extends: other.yaml`` allowed) or shipped preset name (``tiny``, ``base``, ...) with
    dotted ``overrides`` (:func:`genolong.config.presets.apply_overrides`)."""
    source = str(path or "pretrain config")
    data = apply_overrides(read_preset(preset_path("pretrain", source)) if path else {}, overrides or {}, source)
    return from_dict(PretrainConfig, data, source=source)


class MLMDataModule(StepIndexedData):
    """Training windows through a step-indexed sampler; a fixed validation subset, split across ranks."""

    def __init__(self, corpus_dir: Path, tokenizer, config: PretrainConfig):
        self.special = SpecialIds.from_tokenizer(tokenizer)
        super().__init__(config.train, lambda items: collate_windows(items, self.special.pad))
        self.corpus = Corpus(corpus_dir)
        self.config = config

    def setup(self, stage: str | None = None) -> None:
        cfg = self.config
        self.train_set = MLMWindows(self.corpus, "train", self.special, cfg.max_len, cfg.masking, cfg.train.seed)
        self.valid_set = MLMWindows(self.corpus, "valid", self.special, cfg.max_len, cfg.masking,
                                    cfg.train.seed + 1)

    def train_dataloader(self) -> DataLoader:
        return self.loader(self.train_set, self.training_sampler(len(self.train_set)))

    def val_dataloader(self) -> DataLoader:
        count = min(self.config.train.val_windows, len(self.valid_set))
        chosen = np.linspace(0, len(self.valid_set) - 1, count).round().astype(int)
        rank, world = self.trainer.global_rank, self.trainer.world_size
        return self.loader(self.valid_set, [(int(i), int(i)) for i in chosen[rank::world]])


class MLMModule(TrainingModule):
    """GenolongForMaskedLM on batches of input_ids, labels, attention_mask (B, T); validation reports
    loss and bits per bp."""

    RATE_NAME = "tokens"
    RATE_IN_PROGRESS_BAR = True

    def __init__(self, model, config: PretrainConfig, token_bp: np.ndarray, unigram_log2: np.ndarray):
        super().__init__(model, config.train)
        self.config = config
        self.register_buffer("token_bp", torch.as_tensor(token_bp, dtype=torch.float64), persistent=False)
        self.register_buffer("unigram_bits", torch.as_tensor(-unigram_log2, dtype=torch.float64), persistent=False)
        self._val_sums: torch.Tensor | None = None
        self.validated_at_step: int | None = None  # the global step of the latest validation

    def throughput_units(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["attention_mask"].sum())

    def on_validation_epoch_start(self) -> None:
        self._val_sums = torch.zeros(4, dtype=torch.float64, device=self.device)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        labels = batch["labels"]
        logits = self.model(**batch).logits  # (M, V) at the masked positions
        targets = labels[labels != -100]
        nll = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum").double()
        self._val_sums += torch.stack([nll, self.token_bp[targets].sum(), self.unigram_bits[targets].sum(),
                                       torch.tensor(float(len(targets)), dtype=torch.float64, device=self.device)])

    def on_validation_epoch_end(self) -> None:
        nll, bp, unigram_bits, count = self.trainer.strategy.reduce(self._val_sums, reduce_op="sum").tolist()
        self.log_dict({"val/loss": nll / count, "val/bpc": nll / LN2 / bp, "val/unigram_bpc": unigram_bits / bp},
                      prog_bar=True, sync_dist=False)
        self.validated_at_step = self.trainer.global_step


def unigram_log2_probs(corpus: Corpus, vocab_size: int) -> np.ndarray:
    """log2 p(token) of a Laplace-smoothed unigram model of the training shards, (V,)."""
    counts = np.ones(vocab_size, dtype=np.float64)
    for shard in corpus.shards("train"):
        for start in range(0, len(shard.tokens), 1 << 26):  # stream the memory map
            counts += np.bincount(shard.tokens[start:start + (1 << 26)], minlength=vocab_size)[:vocab_size]
    return np.log2(counts / counts.sum())


def _prepare_tokenizer(genome: Path, tokenizer_dir: Path | None, out: Path, config: PretrainConfig) -> Path:
    if tokenizer_dir is not None:
        load_tokenizer(tokenizer_dir)  # validates
        return tokenizer_dir
    target = out / "tokenizer"
    wanted = {"genome": str(genome), "config": to_dict(config.tokenizer)}
    if (target / METADATA_FILE).exists():
        meta = json.loads((target / METADATA_FILE).read_text())
        if {"genome": meta["genome"], "config": meta["config"]} == wanted:
            log.info("tokenizer: %s exists and matches, skipped", target)
            return target
        raise UserError(f"{target} was trained on another genome or configuration",
                        hint="pass --tokenizer, or use another --out")
    log.info("tokenizer: training on %s", genome)
    train_tokenizer(genome, target, config.tokenizer, show_progress=False)
    return target


#: Ranks of one launch start within this many seconds of each other.
LAUNCH_SKEW_S = 60.0


def _wait_for(path: Path, timeout_s: float = 7 * 24 * 3600) -> dict:
    """Poll for the JSON file that rank 0 writes when the data is prepared in this launch (one older
    than the launch, from an earlier run, does not count)."""
    launched = time.time() - LAUNCH_SKEW_S
    deadline = time.monotonic() + timeout_s
    while not path.exists() or path.stat().st_mtime < launched:
        if time.monotonic() > deadline:
            raise UserError(f"timed out waiting for rank 0 to prepare the data ({path})")
        time.sleep(2)
    return json.loads(path.read_text())


def _prepare_data(genome: Path, tokenizer_dir: Path | None, corpus_dir: Path, out: Path, config: PretrainConfig,
                  show_progress: bool, rank: int = 0, world: int = 1) -> Path:
    """The tokenizer and the corpus; returns the tokenizer directory. In a launch of ``world`` ranks,
    rank 0 prepares the tokenizer, then every rank builds its share of the corpus shards."""
    if rank != 0:
        tokenizer_dir = Path(_wait_for(out / "tokenizer-ready.json")["tokenizer"])
    else:
        tokenizer_dir = _prepare_tokenizer(genome, tokenizer_dir, out, config)
        config.model_config(len(load_tokenizer(tokenizer_dir)))  # validate before the long steps
        atomic_write_text(out / "tokenizer-ready.json", json.dumps({"tokenizer": str(tokenizer_dir)}) + "\n")
    build_corpus(genome, tokenizer_dir, corpus_dir, config.corpus, show_progress=show_progress and rank == 0,
                 share=(rank, world))
    if rank != 0:
        return Path(_wait_for(out / "prepared.json")["tokenizer"])
    atomic_write_text(out / "prepared.json", json.dumps({"tokenizer": str(tokenizer_dir)}) + "\n")
    return tokenizer_dir


def run_pretrain(genome: Path, out: Path, config: PretrainConfig, *, tokenizer_dir: Path | None = None,
                 corpus_dir: Path | None = None, resume: bool = False, show_progress: bool = True,
                 extra_callbacks=()) -> dict:
    """Tokenizer, corpus and MLM training into ``out``; returns the final report. ``corpus_dir`` (default
    ``out/corpus``) may be shared by runs of the same tokenizer and corpus configuration."""
    started = time.perf_counter()
    config.train.check_hardware()  # before the tokenizer and corpus steps
    claim_directory(out, "pretrain")
    resume_from = resume_checkpoint(out, resume)
    corpus_dir = out / "corpus" if corpus_dir is None else corpus_dir
    tokenizer = load_tokenizer(_prepare_data(genome, tokenizer_dir, corpus_dir, out, config, show_progress,
                                             global_rank(), world_size()))
    model_config = config.model_config(len(tokenizer))
    corpus = Corpus(corpus_dir)

    identity = {"tokenizer": tokenizer_fingerprint(tokenizer), "corpus": corpus.manifest["config_fingerprint"],
                "model": model_config.to_diff_dict(), "max_len": config.max_len,
                "masking": to_dict(config.masking), "train": to_dict(config.train) | {"max_steps": None}}
    check_run_identity(out, identity, resume, "pretrain")

    pl.seed_everything(config.train.seed, workers=True, verbose=False)
    model = GenolongForMaskedLM(model_config)
    if config.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    module = MLMModule(model, config, token_lengths(tokenizer)[:len(tokenizer)],
                       unigram_log2_probs(corpus, len(tokenizer)))
    data = MLMDataModule(corpus_dir, tokenizer, config)
    trainer = build_trainer(config.train, out, extra_callbacks=extra_callbacks, enable_progress_bar=show_progress)
    fit(trainer, module, data, resume_from)
    with after_training(trainer):  # a signal from here on: stop at once, --resume redoes this part
        if trainer.global_step % config.train.checkpoint_every_steps:  # a checkpoint at the end too
            trainer.save_checkpoint(out / "checkpoints" / "last.ckpt", weights_only=False)
        if trainer.global_step < config.train.max_steps:  # stopped early (interrupted): resumable, no final model
            return {"stopped_at_step": trainer.global_step}
        if module.validated_at_step != trainer.global_step:  # the run did not end on a validation
            trainer.validate(module, datamodule=data, verbose=False)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        report = {"steps": trainer.global_step, "parameters": sum(p.numel() for p in model.parameters()),
                  "backbone": model_config.backbone, "max_len": config.max_len,
                  "val_loss": metrics.get("val/loss"), "val_bpc": metrics.get("val/bpc"),
                  "unigram_bpc": metrics.get("val/unigram_bpc"),
                  "seconds": round(time.perf_counter() - started, 1),
                  "corpus_totals": corpus.manifest["totals"]}
        if trainer.is_global_zero:
            with atomic_path(out / "model", directory=True) as tmp:
                save_model(model, tokenizer, tmp)
            rate = module.throughput.rate  # the figure the progress bar showed last
            report["train_tokens_per_s"] = None if rate is None else round(rate, 1)
            atomic_write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
            plot_learning_curve(out, out / "learning_curve.png")
        return report


def logged_rows(out: Path) -> list[dict[str, str]]:
    """The CSV log rows of a run across restarts (of a step logged by several versions, the latest's)."""
    versions = sorted((out / "logs" / "csv").glob("version_*/metrics.csv"),
                      key=lambda p: int(p.parent.name.removeprefix("version_")))
    rows: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}
    for path in versions:
        with open(path) as handle:
            for row in csv.DictReader(handle):
                filled = {k: v for k, v in row.items() if v not in ("", None)}
                rows[(filled.get("step", ""), tuple(sorted(filled)))] = filled
    return sorted(rows.values(), key=lambda r: int(r.get("step", 0)))


def plot_learning_curve(out: Path, png: Path) -> None:
    """Training loss and validation BPC (with the unigram baseline) against step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = logged_rows(out)

    def series(key):
        points = [(int(r["step"]), float(r[key])) for r in rows if r.get(key)]
        return [p[0] for p in points], [p[1] for p in points]

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(*series("train/loss"), lw=1)
    left.set(xlabel="step", ylabel="masked-token cross-entropy (nats)", title="training loss")
    steps, bpc = series("val/bpc")
    right.plot(steps, bpc, marker="o", label="model")
    _, unigram = series("val/unigram_bpc")
    if unigram:
        right.axhline(unigram[-1], color="grey", ls="--", label="token unigram")
    right.set(xlabel="step", ylabel="bits per base pair", title="validation BPC")
    right.legend()
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
