"""A training run's settings, validated when built: optimisation and devices (:class:`TrainConfig`)
and the fine-tuning modes (:data:`MODES`, :class:`LoraSettings`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from genolong.core.errors import ConfigError, UserError
from genolong.core.values import is_integer, is_number
from genolong.runtime.devices import check_device_hardware, check_device_settings, check_num_nodes, uses_gpu
from genolong.runtime.precision import CHOICES, resolve_precision

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "32", "bf16", "32-true", "bf16-mixed", "16-mixed", "bf16-true")


@dataclass
class TrainConfig:
    """Optimisation and run settings (defaults: BigBird Table 21 where it says).

    Attributes:
        batch_size: windows per device per micro-batch.
        learning_rate, warmup_steps: AdamW with linear warm-up, then linear decay to 0 at ``max_steps``
            (BigBird: 1e-4, 10k warm-up).
        precision: ``auto``, ``32`` or ``bf16`` are resolved by
            :func:`genolong.runtime.precision.resolve_precision`, the one rule training and inference share
            (``$GENOLONG_PRECISION`` decides ``auto``; then bf16 on a GPU or CPU where it is fast, else
            float32); any other of ``PRECISIONS`` is passed to Lightning as it is.
        val_every_steps, val_windows: validation cadence and size (a fixed, evenly spaced subset).
        checkpoint_every_steps: also a checkpoint at the end; ``last.ckpt`` always.
        seed: the run seed (initial weights, dropout, data order, masking).
        accelerator, devices, num_nodes, strategy: passed to Lightning.
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
        """Optimizer steps between validations: ``val_every_steps``, at most ``max_steps`` (every run
        validates at its end)."""
        if self.val_every_steps > self.max_steps:
            log.info("validating at the end of the run: max_steps=%d is below val_every_steps=%d",
                     self.max_steps, self.val_every_steps)
            return self.max_steps
        return self.val_every_steps

    def uses_gpu(self) -> bool:
        return uses_gpu(self.accelerator)

    def resolved_precision(self) -> str:
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


def _require_int(config: TrainConfig, name: str, minimum: int) -> None:
    value = getattr(config, name)
    if not is_integer(value, minimum):
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _require_number(config: TrainConfig, name: str, *, positive: bool = False) -> None:
    value = getattr(config, name)
    if not is_number(value) or (value <= 0 if positive else value < 0):
        raise ConfigError(f"{name} must be a finite number {'>' if positive else '>='} 0, got {value!r}")


#: The fine-tuning modes: which weights train (:mod:`genolong.training.modes`).
MODES = ("full", "lora", "probe")


@dataclass
class LoraSettings:
    """LoRA's rank r, scaling alpha (the update is ``alpha / r * B A``), input dropout and adapted modules."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.05
    targets: list[str] = field(default_factory=lambda: ["qkv", "out", "up", "down"])

    def __post_init__(self) -> None:
        if self.rank < 1 or self.alpha <= 0 or not 0 <= self.dropout < 1 or not self.targets:
            raise ConfigError(f"lora needs rank >= 1, alpha > 0, 0 <= dropout < 1 and target modules, got rank "
                              f"{self.rank}, alpha {self.alpha}, dropout {self.dropout}, targets {self.targets}")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
