"""The numeric precision of every command that runs a model: float32, or bf16 autocast where it is fast.

``--precision auto`` is bf16 on a GPU that supports it, and on a CPU with a native bf16 flag where a
timed matrix product (:mod:`genolong.runtime.cpu_bf16`, cached in ``$GENOLONG_HOME/precision/`` per CPU
model, flags and torch version) is at least :data:`MIN_SPEEDUP` times faster than float32; else float32
(docs/guide/hardware.md). Nothing here imports torch at module import time (the CLI parses without it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from genolong.core.errors import UserError
from genolong.core.files import atomic_write_text, cache_home
from genolong.runtime.launch import is_first_process

log = logging.getLogger(__name__)

#: The values of ``--precision``.
CHOICES = ("auto", "32", "bf16")
#: Other spellings accepted for them (Lightning's, ``genolong bench``'s former ``--dtype``).
ALIASES = {"32-true": "32", "fp32": "32", "float32": "32", "bf16-mixed": "bf16"}
#: Environment variable that decides ``auto`` when set (``32`` or ``bf16``).
ENV = "GENOLONG_PRECISION"
#: /proc/cpuinfo flags of native bf16 arithmetic (AVX-512 BF16, Intel AMX).
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: ``auto`` picks bf16 on a CPU only when its bf16 product is at least this many times faster than float32.
MIN_SPEEDUP = 2.0
#: Lightning precisions of the two choices.
LIGHTNING = {"32": "32-true", "bf16": "bf16-mixed"}

_announced: set[str] = set()


def normalized_precision(text: str) -> str:
    """``auto``, ``32`` or ``bf16`` for ``text`` (one of them or an alias of :data:`ALIASES`); a ValueError
    saying what it must be otherwise."""
    value = ALIASES.get(text, text)
    if value not in CHOICES:
        raise ValueError(f"must be one of {', '.join(CHOICES)}, got {text!r}")
    return value


@dataclass(frozen=True)
class CpuBf16:
    """What decides ``auto`` on this CPU: its model name, the native bf16 flags it advertises and the
    measured matrix-product rates (None: not measured, no flag)."""

    cpu: str
    flags: tuple[str, ...]
    fp32_gflops: float | None = None
    bf16_gflops: float | None = None

    @property
    def fast(self) -> bool:
        """bf16 is native here and measured at least :data:`MIN_SPEEDUP` times faster than float32."""
        return bool(self.flags) and self.bf16_gflops is not None and self.bf16_gflops >= MIN_SPEEDUP * self.fp32_gflops

    def describe(self) -> str:
        """The evidence, as a clause of the announcement."""
        if not self.flags:
            return "this CPU has no avx512_bf16/amx_bf16 flag"
        return (f"{'/'.join(self.flags)}, bf16 product at {self.bf16_gflops:,.0f} GFLOP/s against "
                f"{self.fp32_gflops:,.0f} in float32")


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]]:
    """The CPU's model name and feature flags (Linux); the platform's name and no flags elsewhere."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    return fields.get("model name") or platform.processor() or platform.machine(), set(fields.get("flags", "").split())


def _cache_file(cpu: str, flags: set[str]) -> Path:
    import torch

    key = hashlib.sha256(json.dumps([cpu, sorted(flags), torch.__version__]).encode()).hexdigest()[:16]
    return cache_home() / "precision" / f"cpu-{key}.json"


def _measure(cpu: str, flags: set[str]) -> tuple[float, float]:
    """(fp32, bf16) GFLOP/s, cached (a corrupt entry is measured again; an unwritable cache is skipped)."""
    from genolong.runtime.cpu_bf16 import matmul_rates

    path = _cache_file(cpu, flags)
    try:
        cached = json.loads(path.read_text())
        return float(cached["fp32_gflops"]), float(cached["bf16_gflops"])
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError):
        log.info("%s is not a precision measurement; measuring again", path)
    rates = matmul_rates()
    entry = {"cpu": cpu, "fp32_gflops": round(rates.fp32, 1), "bf16_gflops": round(rates.bf16, 1)}
    try:
        atomic_write_text(path, json.dumps(entry, indent=1) + "\n")
    except OSError as err:
        log.info("precision measurement not cached (%s)", err)
    return entry["fp32_gflops"], entry["bf16_gflops"]


def cpu_bf16(cpuinfo: Path = Path("/proc/cpuinfo"), *, always_measure: bool = False) -> CpuBf16:
    """The native bf16 flags of this CPU and, where it has one (or with ``always_measure``), the rates."""
    cpu, flags = cpu_info(cpuinfo)
    native = tuple(flag for flag in BF16_FLAGS if flag in flags)
    if not (native or always_measure):
        return CpuBf16(cpu, native)
    return CpuBf16(cpu, native, *_measure(cpu, flags))


def _gpu_bf16() -> bool:
    import torch

    return torch.cuda.is_bf16_supported()


def resolve_precision(requested: str, *, gpu: bool) -> str:
    """Lightning's precision for ``requested`` (``auto``, ``32``, ``bf16``) on a GPU or the CPU: ``32-true``
    or ``bf16-mixed``, its choice and reason printed once per command on stderr. ``$GENOLONG_PRECISION``
    decides ``auto`` (a UserError when it holds anything else); an explicit ``bf16`` where bf16 is slow
    gets one warning with the measurement."""
    requested, reason = normalized_precision(requested), f"--precision {requested}"
    if requested == "auto" and os.environ.get(ENV):
        try:
            requested, reason = normalized_precision(os.environ[ENV]), f"{ENV}={os.environ[ENV]}"
        except ValueError as err:
            raise UserError(f"{ENV} {err}") from None
    if requested == "auto" and gpu:
        requested, reason = ("bf16", "the GPU supports bf16") if _gpu_bf16() else ("32", "the GPU has no bf16")
    elif requested == "auto":
        check = cpu_bf16()
        requested, reason = ("bf16" if check.fast else "32"), check.describe()
    elif requested == "bf16" and not gpu:
        check = cpu_bf16(always_measure=True)
        if not check.fast:
            log.warning("bf16 on this CPU is slow: %s; measured bf16 at %.1f GFLOP/s against %.1f in float32",
                        "no avx512_bf16/amx_bf16 flag" if not check.flags else f"less than {MIN_SPEEDUP:g}x float32",
                        check.bf16_gflops, check.fp32_gflops)
    _announce(f"precision: {'bf16 autocast' if requested == 'bf16' else 'float32'} on the "
              f"{'GPU' if gpu else 'CPU'} ({reason})")
    return LIGHTNING[requested]


def precision_on(requested: str | None, target) -> str:
    """Lightning's precision of the forward passes on ``target``: a torch device (``cuda:0``, ``cpu``)
    or a Lightning accelerator (``auto``, ``gpu``, ``cpu``), which runs on the GPU when this machine
    has one; ``requested`` as :func:`resolve_precision`'s, None: ``32-true`` without a line (library use)."""
    if requested is None:
        return "32-true"
    import torch

    gpu = str(target).split(":")[0] in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    return resolve_precision(requested, gpu=gpu)


def autocast(device, precision: str):
    """The context a forward pass runs in: bf16 autocast on ``device`` for ``bf16-mixed``, else none."""
    import torch

    device_type = torch.device(device).type
    return torch.autocast(device_type, dtype=torch.bfloat16) if precision == "bf16-mixed" else contextlib.nullcontext()


def _announce(line: str) -> None:
    """Print ``line`` on stderr once per process, on the first rank of a distributed launch only."""
    if line in _announced:
        return
    _announced.add(line)
    if is_first_process():
        print(line, file=sys.stderr)
