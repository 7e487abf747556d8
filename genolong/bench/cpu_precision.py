"""Is bf16 fast on this CPU? The flags, a measured matrix product, and the dtype to use.

On CPUs without native bf16 arithmetic (no ``avx512_bf16`` or ``amx_bf16`` flag) PyTorch
emulates bf16 matrix products, hundreds of times slower than fp32: on the 2-core AMD EPYC
development machine a 2048^2 bf16 product ran at 0.3 GFLOP/s against 130 for fp32. So bf16 is
chosen automatically only where the flags are present *and* a timed product confirms it, and an
explicit request for it on another CPU is honoured with one warning that gives the measurement.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger(__name__)

#: /proc/cpuinfo flags of native bf16 arithmetic (AVX-512 BF16, Intel AMX).
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: Side of the square matrices of the timed product.
PROBE_SIZE = 512


@dataclass(frozen=True)
class MatmulRates:
    """GFLOP/s of one ``PROBE_SIZE``^2 matrix product in fp32 and in bf16 on this CPU."""

    fp32: float
    bf16: float


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (Linux); empty where /proc/cpuinfo is not readable."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _rate(dtype: torch.dtype, size: int, seconds: float = 0.2) -> float:
    a = torch.randn(size, size, generator=torch.Generator().manual_seed(0)).to(dtype)
    a @ a  # warm-up
    calls, start = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - start < seconds:
        a @ a
        calls += 1
    return 2 * size**3 * calls / (time.perf_counter() - start) / 1e9


@functools.cache
def matmul_rates(size: int = PROBE_SIZE) -> MatmulRates:
    """Measured fp32 and bf16 matrix-product rates (cached per process)."""
    return MatmulRates(fp32=_rate(torch.float32, size), bf16=_rate(torch.bfloat16, size))


def has_native_bf16(flags: set[str] | None = None) -> bool:
    """Whether the CPU advertises bf16 arithmetic."""
    return bool(set(BF16_FLAGS) & (cpu_flags() if flags is None else flags))


def resolve_cpu_dtype(requested: str, flags: set[str] | None = None) -> str:
    """``fp32`` or ``bf16`` for ``requested`` in ``auto | fp32 | bf16``.

    ``auto`` is bf16 only when the CPU has a bf16 flag and bf16 products measure faster than
    fp32; an explicit ``bf16`` where they do not logs one warning with the measured rates.
    """
    if requested == "fp32":
        return "fp32"
    native = has_native_bf16(flags)
    rates = matmul_rates() if native or requested == "bf16" else None
    fast = native and rates is not None and rates.bf16 > rates.fp32
    if requested == "auto":
        return "bf16" if fast else "fp32"
    if not fast:
        log.warning(
            "bf16 on this CPU is slow: %s; measured %dx%d products at %.1f GFLOP/s in bf16 against %.1f in fp32",
            "no avx512_bf16/amx_bf16 flag" if not native else "bf16 measured slower than fp32",
            PROBE_SIZE, PROBE_SIZE, rates.bf16, rates.fp32,
        )
    return "bf16"
