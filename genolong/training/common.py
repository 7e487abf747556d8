"""What every training task shares: the training config, optimizer and schedule, the
Lightning Trainer (loggers, checkpoints, precision, devices), and exact-resume RNG state."""

from __future__ import annotations

import logging
import math
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from torch.utils.data import DataLoader, Dataset

from genolong.core import interrupts
from genolong.core.errors import ConfigError, UserError
from genolong.runtime import ranks
from genolong.runtime.precision import CHOICES, resolve_precision
from genolong.training.checkpoints import SafeCheckpointIO
from genolong.training.console import StepProgress, quiet_lightning
from genolong.training.stopping import StopOnSignal

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "32", "bf16", "32-true", "bf16-mixed", "16-mixed", "bf16-true")


@dataclass
class TrainConfig:
    """Optimisation and run settings (defaults: BigBird Table 21 where it says).

    Attributes:
        max_steps: optimizer steps.
        batch_size: windows per device per micro-batch.
        accumulate_grad_batches: micro-batches per optimizer step.
        learning_rate, warmup_steps: AdamW with linear warm-up, then linear decay to 0
            at ``max_steps`` (BigBird: 1e-4, 10k warm-up).
        weight_decay, max_grad_norm: AdamW decoupled weight decay; gradient clipping.
        precision: ``auto`` = bf16-mixed on a GPU that supports it (else 16-mixed), and on a CPU
            :func:`genolong.runtime.precision.resolve_precision`'s choice (bf16-mixed where native bf16 is
            measured fast, else 32-true); ``32``, ``bf16``, or any Lightning precision string of ``PRECISIONS``.
        gradient_checkpointing: recompute activations in the backward pass.
        val_every_steps, val_windows: validation cadence and size (a fixed subset).
        checkpoint_every_steps: also a checkpoint at the end; ``last.ckpt`` always.
        log_every_steps: logging cadence.
        num_workers: DataLoader worker processes.
        seed: the run seed (initial weights, dropout, data order, masking).
        accelerator, devices, num_nodes, strategy: passed to Lightning (``ddp`` for multi-GPU
            and multi-node).
    """

    max_steps: int = 1000
    batch_size: int = 8
    accumulate_grad_batches: int = 1
    learning_rate: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    precision: str = "auto"
    gradient_checkpointing: bool = False
    val_every_steps: int = 200
    val_windows: int = 64
    checkpoint_every_steps: int = 500
    log_every_steps: int = 10
    num_workers: int = 0
    seed: int = 0
    accelerator: str = "auto"
    devices: int | str = "auto"
    num_nodes: int = 1
    strategy: str = "auto"

    def __post_init__(self) -> None:
        for name in ("max_steps", "batch_size", "accumulate_grad_batches", "val_every_steps", "val_windows",
                     "checkpoint_every_steps", "log_every_steps", "num_nodes"):
            _require_int(self, name, 1)
        for name in ("warmup_steps", "num_workers", "seed"):
            _require_int(self, name, 0)
        _require_number(self, "learning_rate", positive=True)
        _require_number(self, "weight_decay")
        _require_number(self, "max_grad_norm")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; choose one of: {', '.join(PRECISIONS)}")
        check_device_settings(self.accelerator, self.devices)

    def validation_interval(self) -> int:
        """Optimizer steps between validations: ``val_every_steps``, or ``max_steps`` for a run
        shorter than that, so that every run validates at least once, at its end."""
        if self.val_every_steps > self.max_steps:
            log.info("validating at the end of the run: max_steps=%d is below val_every_steps=%d",
                     self.max_steps, self.val_every_steps)
            return self.max_steps
        return self.val_every_steps

    def uses_gpu(self) -> bool:
        """Whether Lightning will train on CUDA GPUs with this accelerator on this machine."""
        return _uses_gpu(self.accelerator)

    def resolved_precision(self) -> str:
        if self.precision == "auto" and self.uses_gpu():
            return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
        if self.precision in CHOICES:
            return resolve_precision(self.precision, gpu=self.uses_gpu())
        return self.precision

    def check_hardware(self) -> None:
        """Raise UserError when this machine lacks what the accelerator, devices and precision ask for."""
        check_device_hardware(self.accelerator, self.devices)
        check_num_nodes(self.num_nodes)
        if not self.uses_gpu() and self.precision == "16-mixed":
            raise UserError("precision '16-mixed' needs a GPU (Lightning would silently train in bf16 on the CPU)",
                            hint="use --precision 32-true or auto on the CPU")


#: Lightning accelerators a run may ask for.
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")


def check_device_settings(accelerator: str, devices: int | str) -> None:
    """ConfigError for an accelerator Lightning is not asked for here or malformed ``devices``
    (shared by training runs and ``scan``: Lightning would raise a multi-line traceback)."""
    if accelerator not in ACCELERATORS:
        raise ConfigError(f"unknown accelerator {accelerator!r}; choose one of: {', '.join(ACCELERATORS)}")
    if not _valid_devices(devices):
        raise ConfigError(f"devices must be 'auto', a number of devices >= 1 or GPU indices like '0,1', "
                          f"got {devices!r}")


def check_device_hardware(accelerator: str, devices: int | str) -> None:
    """UserError when this machine lacks the GPUs that ``accelerator`` and ``devices`` ask for."""
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise UserError(f"accelerator {accelerator!r}: no CUDA GPU is available on this machine",
                        hint="use --accelerator cpu, or auto")
    if accelerator == "mps" and not torch.backends.mps.is_available():
        raise UserError("accelerator 'mps': no Apple GPU is available on this machine",
                        hint="use --accelerator cpu, or auto")
    if _uses_gpu(accelerator) and devices != "auto":
        wanted = max(_device_indices(devices)) + 1
        if wanted > torch.cuda.device_count():
            raise UserError(f"devices {devices!r} needs {wanted} GPUs; this machine has {torch.cuda.device_count()}")


#: Variables a multi-node launch sets on every node: SLURM, torchrun, LSF, or Lightning's own
#: (``NODE_RANK`` with ``MASTER_ADDR``, set by hand or by a scheduler script).
_NODE_LAUNCH_VARIABLES = ("SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "LSB_JOBID", "NODE_RANK")


def check_num_nodes(num_nodes: int) -> None:
    """UserError for ``num_nodes > 1`` outside a multi-node launch: the process would wait forever
    for nodes that were never started."""
    if num_nodes > 1 and not any(name in os.environ for name in _NODE_LAUNCH_VARIABLES):
        raise UserError(f"--num-nodes {num_nodes}: no multi-node launch found (none of "
                        f"{', '.join(_NODE_LAUNCH_VARIABLES)} is set)",
                        hint="start one process per node under SLURM (srun) or torchrun, or set NODE_RANK, "
                        "MASTER_ADDR and MASTER_PORT on each node")


def _uses_gpu(accelerator: str) -> bool:
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


def _require_int(config: TrainConfig, name: str, minimum: int) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _require_number(config: TrainConfig, name: str, *, positive: bool = False) -> None:
    """``config.<name>`` must be a finite number, > 0 when ``positive``, else >= 0."""
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or (
            value <= 0 if positive else value < 0):
        raise ConfigError(f"{name} must be a finite number {'>' if positive else '>='} 0, got {value!r}")


def _valid_devices(devices: int | str) -> bool:
    """'auto', a count >= 1 (also as text), or comma-separated GPU indices ('0,1', '2,')."""
    if devices == "auto":
        return True
    if isinstance(devices, bool):
        return False
    if isinstance(devices, int):
        return devices >= 1
    return isinstance(devices, str) and re.fullmatch(r"\d+(,\d+)*,?", devices.strip()) is not None


def _device_indices(devices: int | str) -> list[int]:
    """The GPU indices ``devices`` (a count or a list) uses."""
    if isinstance(devices, str) and "," in devices:
        return [int(index) for index in devices.split(",") if index.strip()]
    return list(range(int(devices)))


def warmup_linear_decay(optimizer: torch.optim.Optimizer, warmup_steps: int, max_steps: int):
    """LambdaLR: linear warm-up over ``warmup_steps``, then linear decay to 0 at ``max_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def adamw_with_schedule(module: torch.nn.Module, config: TrainConfig, precision: str = "32-true") -> dict:
    """AdamW (no decay on biases and norms) + the warm-up/decay schedule, per step.

    ``precision`` is the Trainer's: its mixed-precision plugins refuse gradient clipping with an optimizer
    that unscales gradients itself, as the fused one does, so ``*-mixed`` with ``max_grad_norm`` takes the
    multi-tensor (``foreach``) kernel instead of the fused one.
    """
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "norm" in name else decay).append(param)
    # fused: one kernel for all parameters (the per-parameter loop was ~1/3 of a small model's step)
    kernel = {"foreach": True} if config.max_grad_norm and "mixed" in precision else {"fused": True}
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
        **kernel,
    )
    scheduler = warmup_linear_decay(optimizer, config.warmup_steps, config.max_steps)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def rng_state(module: torch.nn.Module) -> dict:
    """Every RNG a training step draws from, as tensors and plain Python values so that
    checkpoints load with ``torch.load(weights_only=True)``: the global torch (CPU and each
    CUDA device), numpy and Python generators (dropout, in-process augmentation), and the
    explicit ``generator`` of each submodule of ``module`` that has one (attention layers
    that redraw their random layout per step)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
             "python": random.getstate(),
             "modules": {name: sub.generator.get_state() for name, sub in module.named_modules()
                         if isinstance(getattr(sub, "generator", None), torch.Generator)}}
    if torch.cuda.is_available():
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
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class ResumableRNG:
    """LightningModule mixin: checkpoints carry the RNG state of every rank (:func:`rng_state`),
    and a resumed rank continues from its own, so that dropout and random layouts after a
    resume are those of an uninterrupted run."""

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
    """A training or validation DataLoader of ``config.batch_size`` items.

    It has its own generator: creating an iterator would otherwise draw from the global RNG
    that dropout uses, and a resumed run would see a shifted dropout stream. Its workers ignore
    SIGINT and SIGTERM (a terminal or a scheduler signals the whole process group): the main
    process stops at a step boundary and needs them until then (:mod:`genolong.training.stopping`),
    then shuts them down. The datasets draw no random numbers from global generators, so the
    workers need no seeding.
    """
    return DataLoader(dataset, batch_size=config.batch_size, sampler=sampler, num_workers=config.num_workers,
                      collate_fn=collate_fn, generator=torch.Generator().manual_seed(config.seed),
                      worker_init_fn=interrupts.ignore_in_worker)


class Throughput:
    """A run's training throughput, the one figure its progress bar and report show: units
    (tokens, sequences) per second over every training step so far, a step's time running from
    one call of :meth:`step` to the next; :meth:`pause` leaves out what is not training
    (validation) by dropping the interval it interrupts."""

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
    ``out/checkpoints`` (every ``checkpoint_every_steps`` and ``last.ckpt``, written atomically,
    read weights-only), a :class:`~genolong.training.stopping.StopOnSignal` (run it with
    :func:`genolong.training.stopping.fit`) and, with ``enable_progress_bar``, genolong's
    console (:mod:`genolong.training.console`).

    Raises:
        UserError: this machine lacks the accelerator or devices asked for, or Lightning refuses them.
    """
    config.check_hardware()
    # a new CSV version per (re)start: Lightning's CSVLogger would overwrite the old rows
    loggers = [CSVLogger(out / "logs", name="csv")]
    try:
        loggers.append(TensorBoardLogger(out, name="logs", version="tensorboard"))
    except ModuleNotFoundError:  # tensorboard is a dependency; a stripped install still trains
        log.warning("tensorboard is not installed: CSV logs only")
    interval = config.validation_interval()
    callbacks = [
        ModelCheckpoint(dirpath=out / "checkpoints", filename="step{step}", auto_insert_metric_name=False,
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
            max_steps=config.max_steps,
            accelerator=config.accelerator,
            devices=config.devices,
            num_nodes=config.num_nodes,
            strategy=ranks.strategy(config.strategy, config.devices, config.num_nodes),
            precision=precision,
            accumulate_grad_batches=config.accumulate_grad_batches,
            gradient_clip_val=config.max_grad_norm,
            val_check_interval=interval * config.accumulate_grad_batches,
            check_val_every_n_epoch=None,
            num_sanity_val_steps=0,
            enable_model_summary=False,  # StepProgress logs the model and its parameters
            log_every_n_steps=config.log_every_steps,
            logger=loggers,
            callbacks=callbacks,
            plugins=[SafeCheckpointIO()],
            use_distributed_sampler=False,
            enable_progress_bar=enable_progress_bar,
            default_root_dir=out,
        )
    except (MisconfigurationException, TypeError, ValueError) as err:  # the config's accelerator/devices/strategy
        raise UserError(f"Lightning refuses the trainer settings: {str(err).splitlines()[0]}") from None
