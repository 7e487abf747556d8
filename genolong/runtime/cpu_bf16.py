"""Is bf16 fast on this CPU? A timed matrix product in fp32 and in bf16, the probe that decides
``--precision auto`` (:mod:`genolong.runtime.precision`; measured rates: docs/results/cpu_bf16.md)."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import torch

#: Side of the square matrices of the timed product.
PROBE_SIZE = 512


@dataclass(frozen=True)
class MatmulRates:
    """GFLOP/s of one ``PROBE_SIZE``^2 matrix product in fp32 and in bf16 on this CPU."""

    fp32: float
    bf16: float


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
