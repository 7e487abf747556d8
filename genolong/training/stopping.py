"""SIGINT and SIGTERM during Lightning training: stop where the run resumes exactly.

The CLI turns both signals into :class:`~genolong.core.interrupts.SignalInterrupt` at once; inside
``trainer.fit`` that would land mid-step (Lightning answers a KeyboardInterrupt with exit 1, and a
half-done accumulation cycle would be lost). While :func:`fit` runs, :class:`StopOnSignal` handles them:

* the first asks the run to stop at the next *step boundary* (the end of the optimizer step, or of
  the validation after it), saving ``last.ckpt``; the CLI prints ``stopped at step N; continue with
  --resume`` and exits 130 (SIGINT) or 143 (SIGTERM);
* a second stops at once, without a checkpoint; further ones are ignored while the run unwinds;
* the work after the last step (:func:`after_training`) stops at once; ``--resume`` redoes it.

In a distributed run all ranks stop at the same step (one all-reduce at each boundary).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Checkpoint, EarlyStopping

from genolong.core.interrupts import SignalInterrupt, signal_name
from genolong.runtime import ranks

log = logging.getLogger(__name__)

#: The signals that stop a training run.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingStopped(SignalInterrupt):
    """A training run stopped by a signal: ``last.ckpt`` holds ``step`` (None: stopped at once)."""

    def __init__(self, signum: int, step: int | None, message: str):
        super().__init__(signum, message)
        self.step = step


class _Stopped(Exception):
    """Raised inside ``trainer.fit`` (not a KeyboardInterrupt, which Lightning turns into exit 1)."""

    def __init__(self, signum: int, step: int | None, message: str):
        super().__init__(message)
        self.signum, self.step, self.message = signum, step, message


class StopOnSignal(Checkpoint):
    """Stops training at the first step boundary after SIGINT/SIGTERM, saving ``path`` (``last.ckpt``).

    A :class:`~lightning.pytorch.callbacks.Checkpoint`, so that Lightning calls it after the other
    callbacks and the ModelCheckpoints listed before it (a same-step checkpoint and early stop come first).
    """

    def __init__(self, path: Path, validation_interval: int):
        self.path = Path(path)
        self.validation_interval = validation_interval
        self.received: list[int] = []
        self.saved_step: int | None = None
        self._step_at_batch_start = 0
        self._stopped: _Stopped | None = None  # saved after a validation, raised once it is over

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        """Within the block the signals are this callback's; a stop becomes a :class:`TrainingStopped`."""
        self.received.clear()
        self._stopped = None
        with _signals_handled_by(self._receive):
            yield
            if self._stopped is not None:  # saved after the validation of the last step
                raise self._stopped
        if self.received:  # after the last boundary (Lightning's teardown): the run goes on to its end
            log.warning("training was complete: finishing the run (send the signal again to stop at once)")

    def _receive(self, signum: int, frame) -> None:
        self.received.append(signum)
        if len(self.received) == 1:
            log.warning("%s: stopping at the end of this step (send it again to stop at once)", signal_name(signum))
        elif len(self.received) == 2:
            resume = (f"--resume continues from step {self.saved_step}" if self.saved_step is not None
                      else "no checkpoint was saved yet")
            raise _Stopped(signum, None, f"stopped at once, without a checkpoint; {resume}")

    def _requested(self, trainer: pl.Trainer) -> bool:
        """Whether any rank received a signal (collective)."""
        return trainer.strategy.reduce_boolean_decision(bool(self.received), all=False)

    def _stopped_here(self, trainer: pl.Trainer, *, save: bool = True) -> _Stopped:
        if save:
            trainer.save_checkpoint(self.path, weights_only=False)  # the whole training state
        signum = self.received[0] if self.received else signal.SIGTERM  # another rank's signal
        return _Stopped(signum, trainer.global_step, f"stopped at step {trainer.global_step}; continue with --resume")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.saved_step = trainer.global_step if trainer.global_step else None  # resumed from there
        if threading.current_thread() is threading.main_thread():
            # fit installed Lightning's SIGTERM handler, which would end the run after the next micro-batch
            signal.signal(signal.SIGTERM, self._receive)
        if self._requested(trainer):  # a signal while the run was being set up: nothing new to save
            raise self._stopped_here(trainer, save=False)

    def on_train_batch_start(self, trainer: pl.Trainer, *args) -> None:
        if self._stopped is not None:
            raise self._stopped
        self._step_at_batch_start = trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        stepped = trainer.global_step > self._step_at_batch_start  # the accumulation cycle is complete
        validates = trainer.global_step % self.validation_interval == 0  # then stop after the validation
        if stepped and not validates and self._requested(trainer):
            raise self._stopped_here(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # raised once the validation loop is over, from the next micro-batch or after fit: Lightning
        # then tears the training loop down too, which shuts the DataLoader workers down
        if trainer.state.fn == "fit" and self._requested(trainer):
            self._stopped = self._stopped_here(trainer)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        self.saved_step = trainer.global_step


class ResumableEarlyStopping(EarlyStopping):
    """Lightning's EarlyStopping whose decision survives a resume."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.wait_count >= self.patience:  # restored from the checkpoint
            trainer.should_stop = True


def fit(trainer: pl.Trainer, module: pl.LightningModule, datamodule: pl.LightningDataModule,
        resume_from: Path | None) -> None:
    """``trainer.fit`` (a trainer of :func:`~genolong.training.common.build_trainer`), resuming from
    ``resume_from`` when given, stopping on SIGINT/SIGTERM as :class:`StopOnSignal` says."""
    stopper = next(callback for callback in trainer.callbacks if isinstance(callback, StopOnSignal))
    ranks.set_resume_hint(f"the checkpoints in {stopper.path.parent} are kept; continue with --resume")
    try:
        with stopper.handling():
            trainer.fit(module, datamodule=datamodule, ckpt_path=None if resume_from is None else str(resume_from),
                        weights_only=True)
    finally:  # Lightning tears down the loop that was running; a stop in validation leaves training's
        trainer.fit_loop.teardown()  # DataLoader workers, which ignore signals (common.data_loader)


@contextlib.contextmanager
def after_training(trainer: pl.Trainer) -> Iterator[None]:
    """The work after the last step: a signal stops it at once as a :class:`TrainingStopped` (inside
    Lightning too); ``--resume`` then skips the training and redoes this work."""

    def stop_now(signum: int, frame) -> None:
        raise _Stopped(signum, trainer.global_step,
                       f"stopped after the last step ({trainer.global_step}); continue with --resume")

    with _signals_handled_by(stop_now):
        yield


@contextlib.contextmanager
def _signals_handled_by(handler) -> Iterator[None]:
    """SIGINT and SIGTERM call ``handler`` within the block (main thread only), and a :class:`_Stopped`
    raised in it leaves as :class:`TrainingStopped`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    try:
        yield
    except _Stopped as stopped:
        raise TrainingStopped(stopped.signum, stopped.step, stopped.message) from None
    finally:
        for signum, previous_handler in previous.items():
            signal.signal(signum, previous_handler)
