"""What every training run shares: optimizer and schedule, the Lightning Trainer, exact-resume RNG state."""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from torch.utils.data import DataLoader, Dataset

from genolong.core import interrupts
from genolong.core.errors import UserError
from genolong.runtime import ranks
from genolong.runtime.devices import cuda_available
from genolong.runtime.quiet import quiet_lightning
from genolong.tasks.settings import TrainConfig
from genolong.training.checkpoints import MovableModelCheckpoint, SafeCheckpointIO
from genolong.training.console import StepProgress
from genolong.training.stopping import StopOnSignal

log = logging.getLogger(__name__)


def warmup_linear_decay(optimizer: torch.optim.Optimizer, warmup_steps: int, max_steps: int):
    """LambdaLR: linear warm-up over ``warmup_steps``, then linear decay to 0 at ``max_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def adamw_with_schedule(module: torch.nn.Module, config: TrainConfig, precision: str = "32-true") -> dict:
    """AdamW (no decay on biases and norms) + the warm-up/decay schedule, per step; fused, except under
    the Trainer's ``*-mixed`` ``precision`` with ``max_grad_norm`` (its plugins refuse clipping with an
    optimizer that unscales gradients itself): ``foreach``."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "norm" in name else decay).append(param)
    # fused: one kernel for all parameters (the per-parameter loop was ~1/3 of a small model's step)
    kernel = {"foreach": True} if config.max_grad_norm and "mixed" in precision else {"fused": True}
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate, **kernel)
    scheduler = warmup_linear_decay(optimizer, config.warmup_steps, config.max_steps)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def rng_state(module: torch.nn.Module) -> dict:
    """Every RNG a training step draws from, as tensors and plain values (``weights_only`` loads): torch
    (CPU, CUDA), numpy, Python, and each submodule's own ``generator`` (random attention layouts)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
             "python": random.getstate(),
             "modules": {name: sub.generator.get_state() for name, sub in module.named_modules()
                         if isinstance(getattr(sub, "generator", None), torch.Generator)}}
    if cuda_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, module: torch.nn.Module) -> None:
    """Restore what :func:`rng_state` returned for ``module``."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    random.setstate(state["python"])
    for name, generator_state in state.get("modules", {}).items():
        module.get_submodule(name).generator.set_state(generator_state)
    if "cuda" in state and cuda_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class ResumableRNG:
    """LightningModule mixin: checkpoints carry every rank's :func:`rng_state` and a resumed rank continues
    from its own, as an uninterrupted run would."""

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        state = rng_state(self)
        states = [state]
        if self.trainer.world_size > 1:  # every rank saves (rank 0 writes): gather them all
            states = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(states, state)
        checkpoint["genolong_rng"] = states

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        states = checkpoint.get("genolong_rng")
        if isinstance(states, dict):  # a checkpoint from before per-rank states
            states = [states]
        if states:
            set_rng_state(states[min(self.trainer.global_rank, len(states) - 1)], self)


def data_loader(dataset: Dataset, sampler, config: TrainConfig, collate_fn) -> DataLoader:
    """A DataLoader of ``config.batch_size`` items with its own generator (iterators would otherwise draw
    from dropout's global RNG and shift it on resume), whose workers ignore SIGINT and SIGTERM: the main
    process needs them until it stops at a step boundary (:mod:`genolong.training.stopping`)."""
    return DataLoader(dataset, batch_size=config.batch_size, sampler=sampler, num_workers=config.num_workers,
                      collate_fn=collate_fn, generator=torch.Generator().manual_seed(config.seed),
                      worker_init_fn=interrupts.ignore_in_worker)


class Throughput:
    """Units (tokens, sequences) per second over every training step so far, the figure the progress bar
    and report show; a step's time runs from one :meth:`step` to the next, :meth:`pause` drops the
    interval a validation interrupts."""

    def __init__(self):
        self.last: float | None = None
        self.pending = 0  # units of the step whose interval is running
        self.units = 0
        self.seconds = 0.0

    def step(self, units: int) -> float | None:
        """Start the interval of a step of ``units``; returns :attr:`rate`."""
        now = time.perf_counter()
        if self.last is not None:
            self.units += self.pending
            self.seconds += now - self.last
        self.last, self.pending = now, units
        return self.rate

    def pause(self) -> None:
        self.last = None

    @property
    def rate(self) -> float | None:
        """Units per second so far; None before a step's interval has completed."""
        return self.units / self.seconds if self.seconds > 0 else None


def build_trainer(config: TrainConfig, out: Path, *, extra_callbacks=(), enable_progress_bar: bool = True):
    """A Lightning Trainer with CSV + TensorBoard logs under ``out/logs``, checkpoints under
    ``out/checkpoints`` (periodic and ``last.ckpt``), a :class:`~genolong.training.stopping.StopOnSignal`
    (run it with :func:`genolong.training.stopping.fit`) and, optionally, genolong's progress bar.
    UserError: this machine lacks the accelerator or devices asked for, or Lightning refuses them."""
    config.check_hardware()
    # a new CSV version per (re)start: Lightning's CSVLogger would overwrite the old rows
    loggers = [CSVLogger(out / "logs", name="csv")]
    try:
        loggers.append(TensorBoardLogger(out, name="logs", version="tensorboard"))
    except ModuleNotFoundError:  # tensorboard is a dependency; a stripped install still trains
        log.warning("tensorboard is not installed: CSV logs only")
    interval = config.validation_interval()
    callbacks = [
        MovableModelCheckpoint(dirpath=out / "checkpoints", filename="step{step}", auto_insert_metric_name=False,
                        every_n_train_steps=config.checkpoint_every_steps, save_top_k=-1, save_last=True,
                        enable_version_counter=False),
        LearningRateMonitor(logging_interval="step"),
        *extra_callbacks,
        *([StepProgress()] if enable_progress_bar else []),
        StopOnSignal(out / "checkpoints" / "last.ckpt", interval),  # last: after every other checkpoint
    ]
    quiet_lightning()
    precision = config.resolved_precision()
    log.info("precision %s, accelerator %s, devices %s, strategy %s", precision, config.accelerator,
             config.devices, config.strategy)
    try:
        return pl.Trainer(
            max_steps=config.max_steps, accelerator=config.accelerator, devices=config.devices,
            num_nodes=config.num_nodes,
            strategy=ranks.strategy(config.strategy, config.devices, config.num_nodes),
            precision=precision, accumulate_grad_batches=config.accumulate_grad_batches,
            gradient_clip_val=config.max_grad_norm,
            val_check_interval=interval * config.accumulate_grad_batches,
            check_val_every_n_epoch=None, num_sanity_val_steps=0,
            enable_model_summary=False,  # StepProgress logs the model and its parameters
            log_every_n_steps=config.log_every_steps, logger=loggers, callbacks=callbacks,
            plugins=[SafeCheckpointIO()], use_distributed_sampler=False,
            enable_progress_bar=enable_progress_bar, default_root_dir=out,
        )
    except (MisconfigurationException, TypeError, ValueError) as err:  # the config's accelerator/devices/strategy
        raise UserError(f"Lightning refuses the trainer settings: {str(err).splitlines()[0]}") from None
