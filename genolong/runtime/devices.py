"""The devices a run asks for, checked before any work: the accelerator and ``devices`` settings
(Lightning would raise a multi-line traceback), the GPUs this machine has, and a multi-node launch
for ``num_nodes > 1`` (the process would otherwise wait forever)."""

from __future__ import annotations

import os
import re

import torch

from genolong.core.errors import ConfigError, UserError
from genolong.core.values import is_integer

#: Lightning accelerators a run may ask for.
ACCELERATORS = ("auto", "cpu", "gpu", "cuda", "mps")


def cuda_available() -> bool:
    """Whether a CUDA device can be used here: the one place genolong asks torch (``tests/test_one_home.py``)."""
    return torch.cuda.is_available()


def cuda_device_count() -> int:
    """The number of CUDA devices this process can see."""
    return torch.cuda.device_count()


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``auto``/None: the GPU when there is one, else the CPU; else ``device`` if this machine has it
    (UserError if not, or not a device name)."""
    if device in (None, "auto"):
        return torch.device("cuda" if cuda_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise UserError(f"--device {device}: not a device name", hint="use auto, cpu, cuda or cuda:N") from None
    if resolved.type == "cuda" and (resolved.index or 0) >= cuda_device_count():
        raise UserError(f"--device {device}: this machine has {cuda_device_count()} CUDA GPUs",
                        hint="use --device cpu, or auto")
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"--device {device}: no Apple GPU on this machine", hint="use --device cpu, or auto")
    if resolved.type not in ("cpu", "cuda", "mps"):
        raise UserError(f"--device {device}: genolong runs on cpu, cuda or mps", hint="use --device auto")
    return resolved


def check_device_settings(accelerator: str, devices: int | str) -> None:
    """ConfigError for an accelerator Lightning is not asked for here or malformed ``devices``."""
    if accelerator not in ACCELERATORS:
        raise ConfigError(f"unknown accelerator {accelerator!r}; choose one of: {', '.join(ACCELERATORS)}")
    if not _valid_devices(devices):
        raise ConfigError(f"devices must be 'auto', a number of devices >= 1 or GPU indices like '0,1', "
                          f"got {devices!r}")


def check_device_hardware(accelerator: str, devices: int | str) -> None:
    """UserError when this machine lacks the GPUs that ``accelerator`` and ``devices`` ask for."""
    if accelerator in ("gpu", "cuda") and not cuda_available():
        raise UserError(f"accelerator {accelerator!r}: no CUDA GPU is available on this machine",
                        hint="use --accelerator cpu, or auto")
    if accelerator == "mps" and not torch.backends.mps.is_available():
        raise UserError("accelerator 'mps': no Apple GPU is available on this machine",
                        hint="use --accelerator cpu, or auto")
    if uses_gpu(accelerator) and devices != "auto":
        wanted = max(_device_indices(devices)) + 1
        if wanted > cuda_device_count():
            raise UserError(f"devices {devices!r} needs {wanted} GPUs; this machine has {cuda_device_count()}")


#: Variables a multi-node launch sets on every node: SLURM, torchrun, LSF, or Lightning's own
#: (``NODE_RANK`` with ``MASTER_ADDR``, set by hand or by a scheduler script).
_NODE_LAUNCH_VARIABLES = ("SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "LSB_JOBID", "NODE_RANK")


def check_num_nodes(num_nodes: int) -> None:
    """UserError for ``num_nodes > 1`` outside a multi-node launch."""
    if num_nodes > 1 and not any(name in os.environ for name in _NODE_LAUNCH_VARIABLES):
        raise UserError(f"--num-nodes {num_nodes}: no multi-node launch found (none of "
                        f"{', '.join(_NODE_LAUNCH_VARIABLES)} is set)",
                        hint="start one process per node under SLURM (srun) or torchrun, or set NODE_RANK, "
                        "MASTER_ADDR and MASTER_PORT on each node")


def uses_gpu(accelerator: str) -> bool:
    """Whether Lightning will run on CUDA GPUs with ``accelerator`` on this machine."""
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and cuda_available())


def _valid_devices(devices: int | str) -> bool:
    """'auto', a count >= 1 (also as text), or comma-separated GPU indices ('0,1', '2,')."""
    if isinstance(devices, int):
        return is_integer(devices, 1)
    indices = isinstance(devices, str) and re.fullmatch(r"\d+(,\d+)*,?", devices.strip()) is not None
    return devices == "auto" or indices


def _device_indices(devices: int | str) -> list[int]:
    """The GPU indices ``devices`` (a count or a list) uses."""
    if isinstance(devices, str) and "," in devices:
        return [int(index) for index in devices.split(",") if index.strip()]
    return list(range(int(devices)))
