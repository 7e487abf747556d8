"""What a training run shows on the terminal: genolong's log lines and one progress bar
(:class:`StepProgress`); :func:`genolong.runtime.quiet.quiet_lightning` removes Lightning's model
summary, epoch bar, hardware and tip lines and irrelevant warnings unless ``genolong -v``.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import lightning.pytorch as pl
from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from genolong.core.progress import progress_bar

log = logging.getLogger(__name__)

#: What the bar shows when the run logs it: logged key, label, format.
SHOWN = (("train/loss", "loss", "{:.3f}"), ("train/tokens_per_s", "tokens/s", "{:,.0f}"),
         ("train/sequences_per_s", "seqs/s", "{:,.1f}"), ("val/bpc", "val bits/bp", "{:.3f}"),
         ("val/f1", "val F1", "{:.3f}"), ("val/mean_auc", "val AUC", "{:.3f}"))


class StepProgress(ProgressBar):
    """One bar over optimizer steps on stderr with loss, throughput and the latest validation metric, e.g.
    ``training  40%|####      | 120/300 [01:02<01:33, loss=7.354, tokens/s=2,880, val bits/bp=2.155]``,
    after one log line: the model, its parameters and the steps to run."""

    def __init__(self):
        super().__init__()
        self._enabled = True
        self._bar: tqdm | None = None
        self._logging = contextlib.ExitStack()  # log lines printed above the bar while it runs

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        parameters = sum(p.numel() for p in pl_module.parameters())
        model = type(getattr(pl_module, "model", pl_module)).__name__
        log.info("training %s (%s parameters): steps %d to %d", model, f"{parameters:,}",
                 trainer.global_step + 1, trainer.max_steps)
        self._bar = progress_bar(total=trainer.max_steps, initial=trainer.global_step, desc="training", unit="step",
                         file=sys.stderr, dynamic_ncols=True, disable=not self._enabled)
        self._logging.enter_context(logging_redirect_tqdm())

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        if self._bar is None or trainer.global_step == self._bar.n:  # within an accumulation cycle
            return
        self._bar.set_postfix_str(self.summary(trainer), refresh=False)
        self._bar.update(trainer.global_step - self._bar.n)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(self.summary(trainer), refresh=True)

    @staticmethod
    def summary(trainer: pl.Trainer) -> str:
        """The :data:`SHOWN` values the run has logged, as ``label=value, ...``."""
        metrics = trainer.callback_metrics
        return ", ".join(f"{label}={style.format(float(metrics[key]))}" for key, label, style in SHOWN
                         if key in metrics)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._close()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._close()

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._logging.close()
