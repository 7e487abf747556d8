"""The fine-tuning run, one for every task (:mod:`genolong.tasks.task`): early stopping and the best
checkpoint on the task's validation metric, then the task's test report on the best model, from a
pretrained ``--model`` or from scratch (:mod:`genolong.training.model_setup`). The run directory::

    out/tokenizer/     from scratch without --tokenizer
    out/checkpoints/   best.ckpt (by the monitored metric), last.ckpt, periodic (mode probe: none;
                       out/probe_cache/ holds the embeddings its head trains on)
    out/logs/          csv/version_N/metrics.csv, tensorboard/
    out/model/         the classifier directory, best weights
    out/report.json    validation and test metrics (and what the task's report writes, e.g. out/aucs.csv)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from genolong.classifier.directory import Classifier, TaskInfo, TokenEncoder
from genolong.classifier.records import best_per_record, record_stride, record_windows
from genolong.config import to_dict
from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text, claim_directory
from genolong.dna.sequence import reverse_complement
from genolong.dna.tokenizer import load_tokenizer, tokenizer_fingerprint
from genolong.evaluation.chromatin import evaluation_rows
from genolong.model.heads import output_activation
from genolong.model.loading import read_model_config
from genolong.tasks.task import FinetuneConfig, FinetuneTask, LabelledSequences, TaskData, get_task
from genolong.training.base import StepIndexedData, TrainingModule, check_run_identity
from genolong.training.checkpoints import MovableModelCheckpoint, read_checkpoint, resume_checkpoint
from genolong.training.common import build_trainer
from genolong.training.model_setup import build_classifier_model, train_task_tokenizer
from genolong.training.modes import apply_mode, check_start, merged_model, trainable_parameters
from genolong.training.probe import head_pooling, train_probe
from genolong.training.stopping import ResumableEarlyStopping, after_training, fit

log = logging.getLogger(__name__)


#: Training records whose length is checked against max_len (evenly spaced over the split).
CROP_CHECK_ROWS = 256


def log_cropping(encoder: TokenEncoder, rows: LabelledSequences) -> None:
    """Log how records longer than ``max_len`` tokens are read (no silent truncation)."""
    sample = [rows.sequence(int(i)) for i in evaluation_rows(len(rows), CROP_CHECK_ROWS)]
    described = encoder.describe_cropping(sample, "sampled training records")
    if described is not None:
        log.warning("%s; a longer max_len needs a long model: `genolong convert MODEL --backbone lsg --max-length N`, "
                    "or --backbone sled", described)


def random_crop(sequence: str, min_bp: int, rng: np.random.Generator) -> str:
    """A random sub-window of ``sequence``: length uniform in ``min_bp..len``, start uniform where it fits."""
    if len(sequence) <= min_bp:
        return sequence
    length = int(rng.integers(min_bp, len(sequence) + 1))
    start = int(rng.integers(0, len(sequence) - length + 1))
    return sequence[start : start + length]


@dataclass(eq=False)
class TrainingInputs(Dataset):
    """``dataset[(position, index)]``: ``{"sequence": str, "labels": (C,) float32}``, optionally a random
    crop of the row and half of the time its reverse complement, drawn from ``(seed, position)``."""

    rows: LabelledSequences
    crop_min_bp: int | None = None
    seed: int = 0
    reverse_complement: bool = False

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: tuple[int, int]) -> dict[str, Any]:
        position, index = key
        sequence = self.rows.sequence(index)
        rng = np.random.default_rng([self.seed, position])
        if self.crop_min_bp is not None:
            sequence = random_crop(sequence, self.crop_min_bp, rng)
        if self.reverse_complement and rng.random() < 0.5:
            sequence = reverse_complement(sequence)
        return {"sequence": sequence, "labels": self.rows.labels(index)}


class ValidationWindows(Dataset):
    """The validation ``subset`` (row indices) in the windows ``predict`` scans; items as
    :class:`TrainingInputs`'s plus ``record``, the position in ``subset`` of the window's row."""

    def __init__(self, rows: LabelledSequences, subset: np.ndarray, window: int):
        self.rows, self.subset = rows, subset
        self.windows, self.record = record_windows([rows.sequence(int(i)) for i in subset], window, record_stride(window))

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        record = int(self.record[index])
        return {"sequence": self.windows[index], "labels": self.rows.labels(int(self.subset[record])), "record": record}


@dataclass(eq=False)
class Collate:
    """Items -> ``input_ids``, ``attention_mask`` (B, T), ``labels`` (B, C) float32 and, for
    :class:`ValidationWindows` items, ``record`` (B,) int64."""

    encoder: TokenEncoder

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.encoder([item["sequence"] for item in items])
        batch["labels"] = torch.from_numpy(np.stack([item["labels"] for item in items]))
        if "record" in items[0]:
            batch["record"] = torch.tensor([item["record"] for item in items], dtype=torch.int64)
        return batch


class FinetuneDataModule(StepIndexedData):
    """Training inputs in step-indexed order; a fixed, evenly spaced validation subset on every rank."""

    def __init__(self, data: TaskData, encoder: TokenEncoder, config: FinetuneConfig):
        super().__init__(config.train, Collate(encoder))
        self.data = data
        self.config = config

    def train_dataloader(self) -> DataLoader:
        rows = self.data.splits["train"]
        inputs = TrainingInputs(rows, self.config.crop_min_bp, self.train.seed, self.config.augment_reverse_complement)
        return self.loader(inputs, self.training_sampler(len(rows)))

    def val_dataloader(self) -> DataLoader:
        valid = self.data.splits["valid"]
        windows = ValidationWindows(valid, evaluation_rows(len(valid), self.train.val_windows), self.data.window_bp)
        return self.loader(windows, range(len(windows)))


class ClassifierModule(TrainingModule):
    """GenolongForSequenceClassification trained on its loss; validation logs the task's
    ``validation_metrics`` of each row's best window and ``val/loss`` (the mean over windows)."""

    def __init__(self, model, config: FinetuneConfig):
        super().__init__(model, config.train)
        self.config = config
        self.task = get_task(config.task)
        self._val: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def on_validation_epoch_start(self) -> None:
        self._val = []

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        record = batch.pop("record")
        output = self.model(**batch)
        count = torch.tensor(float(len(batch["labels"])))
        outputs = output_activation(output.logits.float(), self.model.config.problem_type)
        self._val.append((outputs.cpu(), batch["labels"].cpu(), record.cpu(),
                          output.loss.detach().float().cpu() * count))

    def on_validation_epoch_end(self) -> None:
        outputs, labels, records, losses = zip(*self._val, strict=True)
        windows, record = torch.cat(outputs).numpy(), torch.cat(records).numpy()
        _, first = np.unique(record, return_index=True)
        metrics = self.task.validation_metrics(torch.cat(labels).numpy()[first],
                                               best_per_record(windows, record, len(first)))
        metrics["val/loss"] = float(sum(losses)) / len(record)
        self.log_dict(metrics, prog_bar=True, sync_dist=False)
        self._val = []


def run_finetune(data_dir: str | Path, out: str | Path, config: FinetuneConfig, *,
                 pretrained: Path | None = None, tokenizer_dir: Path | None = None,
                 asked: Collection[str] = (), resume: bool = False, show_progress: bool = True,
                 extra_callbacks=()) -> dict:
    """Fine-tune ``config.task`` on ``data_dir`` into ``out``; returns the report (also ``out/report.json``),
    ``{"stopped_at_step": n}`` for a run stopped from outside, ``{}`` on a rank other than 0. ``asked``:
    the ``model.`` keys set on the command line
    (:func:`~genolong.training.model_setup.build_classifier_model`).
    """
    started = time.perf_counter()
    config.train.check_hardware()
    out, task = Path(out), get_task(config.task)
    if pretrained is not None and tokenizer_dir is not None:
        raise UserError("give --model or --tokenizer, not both: a pretrained model brings its tokenizer")
    if pretrained is not None:
        read_model_config(pretrained)  # a missing or broken model directory fails before any work
    check_start(config.mode, pretrained)
    data = task.load_data(Path(data_dir))
    claim_directory(out, "finetune")
    resume_from = resume_checkpoint(out, resume)
    if pretrained is not None:
        tokenizer_dir = Path(pretrained)
    elif tokenizer_dir is None:
        tokenizer_dir = train_task_tokenizer(data.splits["train"], out / "tokenizer", config.tokenizer, config.max_len)
    tokenizer = load_tokenizer(tokenizer_dir)

    pl.seed_everything(config.train.seed, workers=True, verbose=False)
    model = build_classifier_model(config, len(data.label_names), tokenizer, pretrained, data.problem_type, asked)
    identity = _run_identity(config, data, tokenizer, model, pretrained)
    check_run_identity(out, identity, resume, "fine-tuning")
    model = apply_mode(model, config.mode, config.lora)
    facts = {"pretrained": identity["pretrained"], "mode": config.mode, "trainable_parameters": trainable_parameters(model)}
    pooling = head_pooling(model) if config.mode == "probe" else None
    if pooling is not None:  # the frozen encoder once per split, cached; the head on the arrays
        run = train_probe(model, tokenizer, data, config, task, out, pooling)
        return _complete(task, merged_model(model, config.mode), tokenizer, data, config, out, run | facts, started)

    module = ClassifierModule(model, config)
    trainer, best, stopper = _trainer(task, config, out, show_progress, extra_callbacks)
    encoder = TokenEncoder(tokenizer, config.max_len)
    log_cropping(encoder, data.splits["train"])
    fit(trainer, module, FinetuneDataModule(data, encoder, config), resume_from)
    early_stopped = stopper.wait_count >= config.patience
    if trainer.global_step < config.train.max_steps and not early_stopped:  # stopped from outside: resumable
        return {"stopped_at_step": trainer.global_step}
    if not trainer.is_global_zero:
        return {}
    with after_training(trainer):  # a signal from here on: stop at once, --resume redoes this part
        best_checkpoint = read_checkpoint(best.best_model_path)
        module.load_state_dict(best_checkpoint["state_dict"])
        model = merged_model(module.model, config.mode, out / "adapters" if config.mode == "lora" else None)
        run = {"steps": trainer.global_step, "best_step": int(best_checkpoint["global_step"]),
               "early_stopped": early_stopped,
               "monitor": {"metric": task.monitor, "best": float(best.best_model_score)}, **facts}
        return _complete(task, model, tokenizer, data, config, out, run, started)


def _complete(task: FinetuneTask, model, tokenizer, data: TaskData, config: FinetuneConfig, out: Path, run: dict,
              started: float) -> dict:
    """The trained ``model``'s report (``run``'s facts, the model's, the task's); writes ``out/model``
    (the classifier with its threshold and provenance) and ``out/report.json``."""
    classifier = Classifier(model, tokenizer, _task_info(config, data))
    info = classifier.info
    report = {"task": config.task, **run, "parameters": sum(p.numel() for p in model.parameters()),
              "backbone": model.config.backbone, "max_len": config.max_len, "window_bp": info.window_bp,
              "min_bp": info.min_bp, "data": data.source}
    report |= task.test_report(classifier, data, config, out)
    info.threshold = report.get("threshold")
    info.provenance = {"report": report, "config": to_dict(config), "genolong_run": str(out.resolve())}
    classifier.save(out / "model")
    report["seconds"] = round(time.perf_counter() - started, 1)
    atomic_write_text(out / "report.json", json.dumps(report, indent=2) + "\n")
    return report


def _run_identity(config: FinetuneConfig, data: TaskData, tokenizer, model, pretrained: Path | None) -> dict:
    """The settings that decide a fine-tuning run's results (``max_steps`` aside: a run may be extended)."""
    return {"task": config.task, "data": data.source, "tokenizer": tokenizer_fingerprint(tokenizer),
            "pretrained": None if pretrained is None else str(Path(pretrained).resolve()),
            "model": {k: v for k, v in model.config.to_diff_dict().items() if k != "transformers_version"},
            "max_len": config.max_len, "crop_min_bp": config.crop_min_bp,
            **({"augment_reverse_complement": True} if config.augment_reverse_complement else {}),
            "train": to_dict(config.train) | {"max_steps": None},
            **({} if config.mode == "full" else {"mode": config.mode, "lora": to_dict(config.lora)})}


def _trainer(task: FinetuneTask, config: FinetuneConfig, out: Path, show_progress: bool, extra_callbacks):
    """The Trainer with the best checkpoint and early stopping on ``task.monitor``; also returns those two."""
    best = MovableModelCheckpoint(
        dirpath=out / "checkpoints", filename="best", monitor=task.monitor, mode="max", save_top_k=1,
        save_last=True,  # after each validation, so that a resumed run knows the best so far
        auto_insert_metric_name=False, enable_version_counter=False)
    stopper = ResumableEarlyStopping(monitor=task.monitor, mode="max", patience=config.patience,
                                     check_on_train_epoch_end=False)
    trainer = build_trainer(config.train, out, extra_callbacks=[best, stopper, *extra_callbacks],
                            enable_progress_bar=show_progress)
    return trainer, best, stopper


def _task_info(config: FinetuneConfig, data: TaskData) -> TaskInfo:
    """What the classifier directory records (the shortest input: the crop length when shorter)."""
    min_bp = data.min_bp if config.crop_min_bp is None else min(config.crop_min_bp, data.min_bp)
    spec = replace(get_task(config.task).inference_spec(data.window_bp, data.problem_type),
                   both_strands=config.augment_reverse_complement)
    return TaskInfo(config.task, data.window_bp, min_bp, config.max_len, data.label_names, inference=spec)

