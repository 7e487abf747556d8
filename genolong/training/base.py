"""The Lightning base of every training task: :class:`TrainingModule` (a model trained on its own
loss with AdamW and the warm-up/decay schedule, a throughput metric and every rank's RNG state in its
checkpoints), :class:`StepIndexedData` (training inputs in step-indexed order, so a resumed run
continues exactly) and :func:`check_run_identity` (one run directory holds one run).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset

from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text
from genolong.datasets.mlm import PositionSampler
from genolong.tasks.settings import TrainConfig
from genolong.training.common import ResumableRNG, Throughput, adamw_with_schedule, data_loader

log = logging.getLogger(__name__)


class TrainingModule(ResumableRNG, pl.LightningModule):
    """``model`` trained on ``model(**batch).loss`` for batches of (B, T) tensors; subclasses add their
    validation and say what their throughput counts (logged as ``train/<RATE_NAME>_per_s``)."""

    RATE_NAME = "sequences"
    RATE_IN_PROGRESS_BAR = False

    def __init__(self, model: torch.nn.Module, train: TrainConfig):
        super().__init__()
        self.model = model
        self.train_config = train
        self.throughput = Throughput()

    def throughput_units(self, batch: dict[str, torch.Tensor]) -> int:
        """What this rank processed in ``batch``: its sequences (subclasses may count tokens)."""
        return len(batch["input_ids"])

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        self.log("train/loss", loss, prog_bar=True)
        rate = self.throughput.step(self.throughput_units(batch) * self.trainer.world_size)
        if rate is not None:
            self.log(f"train/{self.RATE_NAME}_per_s", rate, prog_bar=self.RATE_IN_PROGRESS_BAR)
        return loss

    def on_validation_start(self) -> None:
        self.throughput.pause()  # the throughput counts training steps only

    def configure_optimizers(self) -> dict:
        return adamw_with_schedule(self.model, self.train_config, precision=str(self.trainer.precision))


class StepIndexedData(pl.LightningDataModule):
    """A DataModule whose training order is a function of the step: a :class:`PositionSampler` seeded
    with ``train.seed``, started at the trainer's global step and split across ranks."""

    def __init__(self, train: TrainConfig, collate: Callable[[list[Any]], dict[str, torch.Tensor]]):
        super().__init__()
        self.train = train
        self.collate = collate

    def loader(self, dataset: Dataset, sampler) -> DataLoader:
        return data_loader(dataset, sampler, self.train, self.collate)

    def training_sampler(self, rows: int) -> PositionSampler:
        """``(position, row)`` pairs over ``rows`` training rows for this rank, from the current step on."""
        rank, world = self.trainer.global_rank, self.trainer.world_size
        global_batch = self.train.batch_size * self.train.accumulate_grad_batches * world
        start = self.trainer.global_step * global_batch
        log.info("rank %d/%d reads training sample positions %d, %d, ... of %d rows", rank, world,
                 start + rank, start + rank + world, rows)
        return PositionSampler(rows, self.train.max_steps * global_batch, seed=self.train.seed, start=start,
                               rank=rank, world_size=world)


def check_run_identity(out: Path, identity: dict[str, Any], resume: bool, kind: str) -> None:
    """Refuse (UserError, nothing written) to mix runs in ``out``: a ``run.json`` of another ``identity``
    (the settings that decide the results), checkpoints of no genolong ``kind`` run, or checkpoints
    without ``resume``. Then ``run.json`` records ``identity``."""
    identity = json.loads(json.dumps(identity))  # as it reads back (JSON keys are strings)
    path, checkpoints = out / "run.json", out / "checkpoints"
    has_checkpoints = checkpoints.is_dir() and any(checkpoints.iterdir())
    if path.is_file():
        previous = json.loads(path.read_text())
        changed = sorted(k for k in identity.keys() | previous.keys() if previous.get(k) != identity.get(k))
        if changed:
            raise UserError(f"{out} holds a {kind} run with another {', '.join(changed)}",
                            hint="choose another --out; nothing was overwritten")
    elif has_checkpoints:
        raise UserError(f"{checkpoints} holds checkpoints that are not from a genolong {kind} run",
                        hint="choose another --out; nothing was overwritten")
    if has_checkpoints and not resume:
        raise UserError(f"{out} already holds checkpoints of this run",
                        hint="pass --resume to continue it, or choose another --out")
    atomic_write_text(path, json.dumps(identity, indent=1, sort_keys=True) + "\n")
