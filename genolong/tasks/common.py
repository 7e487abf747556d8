"""What every training task shares: the training config, optimizer and schedule, the
Lightning Trainer (loggers, checkpoints, precision), and exact-resume RNG state."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genolong.errors import ConfigError

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true")


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
        precision: ``auto`` = bf16-mixed on a GPU that supports it (else 16-mixed), 32-true
            on CPU; or any Lightning precision string of ``PRECISIONS``.
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
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0 or self.learning_rate <= 0:
            raise ConfigError("warmup_steps must be >= 0 and learning_rate > 0")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; choose one of: {', '.join(PRECISIONS)}")

    def resolved_precision(self) -> str:
        if self.precision != "auto":
            return self.precision
        if torch.cuda.is_available() and self.accelerator in ("auto", "gpu", "cuda"):
            return "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
        return "32-true"


def warmup_linear_decay(optimizer: torch.optim.Optimizer, warmup_steps: int, max_steps: int):
    """LambdaLR: linear warm-up over ``warmup_steps``, then linear decay to 0 at ``max_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (max_steps - step) / max(1, max_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def adamw_with_schedule(module: torch.nn.Module, config: TrainConfig) -> dict:
    """AdamW (no decay on biases and norms) + the warm-up/decay schedule, per step."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 or "norm" in name else decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
        fused=True,  # one kernel for all parameters: the per-parameter loop was ~1/3 of a small model's step
    )
    scheduler = warmup_linear_decay(optimizer, config.warmup_steps, config.max_steps)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def rng_state() -> dict:
    """Every RNG a training step draws from (dropout, in-process augmentation), as tensors and
    plain Python values so that checkpoints load with ``torch.load(weights_only=True)``."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
             "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class Throughput:
    """Tokens per second between consecutive calls of :meth:`step`."""

    def __init__(self):
        self.last = None

    def step(self, tokens: int) -> float | None:
        now = time.perf_counter()
        rate = None if self.last is None else tokens / max(now - self.last, 1e-9)
        self.last = now
        return rate


def build_trainer(config: TrainConfig, out: Path, *, monitor: str | None = None, mode: str = "min",
                  extra_callbacks=(), enable_progress_bar: bool = True):
    """A Lightning Trainer with CSV + TensorBoard logs under ``out/logs`` and checkpoints
    under ``out/checkpoints`` (every ``checkpoint_every_steps`` and ``last.ckpt``)."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    # a new CSV version per (re)start: Lightning's CSVLogger would overwrite the old rows
    loggers = [CSVLogger(out / "logs", name="csv")]
    try:
        loggers.append(TensorBoardLogger(out, name="logs", version="tensorboard"))
    except ModuleNotFoundError:  # tensorboard is a dependency; a stripped install still trains
        log.warning("tensorboard is not installed: CSV logs only")
    callbacks = [
        ModelCheckpoint(dirpath=out / "checkpoints", filename="step{step}", auto_insert_metric_name=False,
                        every_n_train_steps=config.checkpoint_every_steps, save_top_k=-1, save_last=True),
        LearningRateMonitor(logging_interval="step"),
        *extra_callbacks,
    ]
    precision = config.resolved_precision()
    log.info("precision %s, accelerator %s, devices %s, strategy %s", precision, config.accelerator,
             config.devices, config.strategy)
    return pl.Trainer(
        max_steps=config.max_steps,
        accelerator=config.accelerator,
        devices=config.devices,
        num_nodes=config.num_nodes,
        strategy=config.strategy,
        precision=precision,
        accumulate_grad_batches=config.accumulate_grad_batches,
        gradient_clip_val=config.max_grad_norm,
        val_check_interval=config.val_every_steps * config.accumulate_grad_batches,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        log_every_n_steps=config.log_every_steps,
        logger=loggers,
        callbacks=callbacks,
        use_distributed_sampler=False,
        enable_progress_bar=enable_progress_bar,
        default_root_dir=out,
    )
