"""Process memory high-water marks on Linux (``/proc/self/status``), for benchmarks and reports."""

from __future__ import annotations

import ctypes
import gc


def proc_status_mb(field_name: str, pid: int | str = "self") -> float:
    """A ``VmRSS`` / ``VmHWM`` line of /proc/PID/status, in MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field_name)


def reset_peak_memory() -> float:
    """Return freed heap to the system, reset the RSS high-water mark; the current RSS in MB."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return proc_status_mb("VmRSS")
