"""Lightning's predict loop for inference commands, on one process or many ranks (``--devices``,
``--num-nodes``, SLURM or ``torchrun``): rank ``r`` of ``W`` computes items ``i % W == r`` (a rank without
work gets one empty item) into part files that rank 0 merges into exactly the bytes one process writes.
:class:`ScanModule` and :class:`ScanPartWriter` are ``genolong scan``'s.
"""

from __future__ import annotations

import abc
import logging
import sys
import time
import warnings

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import BasePredictionWriter

from genolong.classifier.scoring import average_strands, token_outputs
from genolong.core import interrupts
from genolong.core.errors import UserError
from genolong.core.progress import progress_bar
from genolong.inference.scan.parts import RankWriter, WorkDirectory
from genolong.runtime import ranks
from genolong.runtime.devices import check_num_nodes
from genolong.runtime.precision import precision_on
from genolong.runtime.quiet import quiet_lightning

log = logging.getLogger(__name__)
# items are whole batches (DataLoader(batch_size=None)): a PartWriter takes its index from the item
warnings.filterwarnings("ignore", message="Couldn't infer the batch indices")


class ScanModule(pl.LightningModule):
    """Probabilities of a batch of windows (with ``rc``: S windows, then their S reverse complements,
    averaged) on the outputs ``columns`` (None: all), scattered back onto its bins."""

    def __init__(self, model, *, rc: bool, columns: list[int] | None, kmer=None):
        super().__init__()
        self.model = model.eval()
        self.rc, self.columns, self.kmer, self.warmed_up = rc, columns, kmer, False

    def probabilities(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) token rows -> (B, C) float32 outputs (:func:`genolong.classifier.scoring.token_outputs`)."""
        return token_outputs(self.model, input_ids, attention_mask, kmer=self.kmer, first_token_only=True)

    def predict_step(self, batch: dict, batch_idx: int) -> dict:
        """``batch`` (the plan's index), ``bp`` (its bins' width) and ``scores`` (bins, C') float32 on the
        CPU; raises the :class:`UserError` an item carries from its DataLoader worker."""
        if "error" in batch:
            raise UserError(batch["error"])
        scored = batch["scored"].cpu()
        width = self.model.config.num_labels if self.columns is None else len(self.columns)
        scores = torch.full((len(scored), width), float("nan"))
        if batch["input_ids"].shape[0]:
            probabilities = self.probabilities(batch["input_ids"], batch["attention_mask"])  # (S or 2S, C)
            if self.rc:
                probabilities = average_strands(probabilities)
            if self.columns is not None:
                probabilities = probabilities[:, self.columns]
            scores[scored] = probabilities.cpu()
        return {"batch": int(batch["batch"]), "bp": int(batch["bp"]), "scores": scores.numpy()}

    def on_predict_start(self) -> None:
        """One call on a dummy batch, so that one-time costs (allocations, kernel choice) are not timed."""
        if not self.warmed_up:
            ids = torch.full((2, 8), self.model.config.pad_token_id or 0, device=self.device)
            self.probabilities(ids, torch.ones_like(ids))
            self.warmed_up = True


class StepModule(pl.LightningModule):
    """The predict step ``step(item)`` of a model already on this rank's device."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def predict_step(self, item, batch_idx: int):
        return self.step(item)


class PartWriter(BasePredictionWriter, abc.ABC):
    """Writes every predicted item to the rank's part files (subclasses implement ``write``, and ``open`` and
    ``close`` when they keep files open), with a progress bar of ``total`` ``unit`` on rank 0."""

    def __init__(self, total: int | None, *, progress: bool, description: str, unit: str):
        super().__init__(write_interval="batch")
        self.total, self.show_progress, self.description, self.unit = total, progress, description, unit
        self.bar, self.started, self.done, self.interrupted = None, None, 0, False

    def open(self, trainer) -> None:
        """Open this rank's part files (``trainer.global_rank``); none by default."""

    @abc.abstractmethod
    def write(self, prediction) -> int:
        """Write one predicted item; return the progress it made, in ``unit`` (0: an empty item)."""

    def close(self, finished: bool) -> None:
        """Close the part files; ``finished`` is False after an exception. None by default."""

    def on_predict_start(self, trainer, pl_module) -> None:
        self.open(trainer)
        self.bar = progress_bar(total=self.total, unit=self.unit, unit_scale=True, desc=self.description, file=sys.stderr,
                        disable=None if self.show_progress and trainer.global_rank == 0 else True)
        self.started, self.done = time.perf_counter(), 0

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx=0) -> None:
        amount = self.write(prediction)
        self.bar.update(amount)
        self.done += amount

    def on_predict_end(self, trainer, pl_module) -> None:
        self.close(finished=True)
        self.bar.close()
        elapsed = time.perf_counter() - self.started
        log.info("rank %d/%d: %s%s in %.1f s", trainer.global_rank, trainer.world_size, f"{self.done:,}",
                 self.unit, elapsed)

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.interrupted = isinstance(exception, KeyboardInterrupt)
        self.close(finished=False)
        if self.bar is not None:
            self.bar.close()


class ScanPartWriter(PartWriter):
    """Appends each scan batch's scores to the rank's per-chromosome parts (:mod:`~genolong.inference.scan.parts`)."""

    def __init__(self, work: WorkDirectory, share_bp: int, *, progress: bool, description: str):
        super().__init__(share_bp, progress=progress, description=description, unit="bp")
        self.work, self.writer = work, None

    def open(self, trainer) -> None:
        self.writer = RankWriter(self.work, trainer.global_rank)

    def write(self, prediction: dict) -> int:
        if prediction["batch"] < 0:  # the empty item of a rank without batches
            return 0
        self.writer.write(prediction["batch"], prediction["scores"])
        return prediction["bp"]

    def close(self, finished: bool) -> None:
        if self.writer is not None:
            self.writer.close()


def predict(trainer: pl.Trainer, module: pl.LightningModule, loader, writer: PartWriter, *, resume: str) -> None:
    """Run the predict loop; an interrupt (which Lightning turns into exit status 1) stops the command with
    ``interrupted; RESUME`` and its own status (``resume``: how to continue, also said when a rank dies)."""
    trainer.callbacks.append(writer)
    ranks.set_resume_hint(resume)
    try:
        trainer.predict(module, dataloaders=loader, return_predictions=False)
    except SystemExit:
        if writer.interrupted:
            interrupts.stop(f"interrupted; {resume}")
        raise


def build_trainer(*, accelerator: str, devices, num_nodes: int, callbacks, precision: str = "auto") -> pl.Trainer:
    """A Trainer for predicting only (DDP for several devices or nodes; ``precision``: ``auto``, ``32`` or
    ``bf16``); settings this machine cannot run raise :class:`UserError` before any work."""
    quiet_lightning()
    check_num_nodes(num_nodes)
    try:
        return pl.Trainer(
            accelerator=accelerator, devices=devices, num_nodes=num_nodes,
            strategy=ranks.strategy("auto", devices, num_nodes),  # DDP for several devices or nodes
            precision=precision_on(precision, accelerator),
            logger=False, enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
            use_distributed_sampler=False, callbacks=callbacks,
        )
    except (MisconfigurationException, TypeError, ValueError) as err:
        raise UserError(f"Lightning refuses --accelerator {accelerator} --devices {devices}: "
                        f"{str(err).splitlines()[0]}") from None
