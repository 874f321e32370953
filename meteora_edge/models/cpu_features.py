"""What the CPU this process runs on can do, read once from the operating system.

On Linux the kernel lists the instruction-set extensions in ``/proc/cpuinfo`` (``flags`` on
x86, ``Features`` on ARM). Elsewhere nothing is guessed: the flags are empty and callers
take their safe default. The int8 dot-product instructions are what decide whether a fully
int8 encoder pays off: x86 VNNI (``avx512_vnni``, ``avx_vnni``) and AMX (``amx_int8``) multiply
and add four int8 pairs per lane in one instruction, as ARM's ``asimddp`` (dot product) and
``i8mm`` (int8 matrix multiply) do; without them an int8 GEMM is barely faster than fp32.

Example:
    >>> info = cpu_info()
    >>> isinstance(info.flags, frozenset)
    True
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

__all__ = ["CpuInfo", "cpu_info", "read_cpuinfo", "usable_cores", "INT8_DOT_FLAGS", "REPORTED_FLAGS"]

# in order of preference when naming the one that decided
INT8_DOT_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni", "i8mm", "asimddp")
# what doctor and the benchmarks print (the rest of /proc/cpuinfo's list is noise for this package)
REPORTED_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16",
    "amx_tile", "amx_int8", "amx_bf16", "neon", "asimd", "asimddp", "i8mm", "sve",
)


@dataclass(frozen=True)
class CpuInfo:
    """The processor's name and extension flags.

    Args:
        model: the model name ("unknown" when the system does not say).
        machine: ``platform.machine()`` (``x86_64``, ``aarch64``, ``arm64`` …).
        flags: lower-case extension names; empty when they could not be read.
        source: where the flags came from (``/proc/cpuinfo`` or ``unavailable``).
    """

    model: str
    machine: str
    flags: frozenset[str]
    source: str

    @property
    def int8_dot(self) -> str | None:
        """The int8 dot-product extension this CPU has (e.g. ``avx512_vnni``), or None."""
        return next((f for f in INT8_DOT_FLAGS if f in self.flags), None)

    @property
    def reported(self) -> list[str]:
        """The flags of :data:`REPORTED_FLAGS` this CPU has, in that order."""
        return [f for f in REPORTED_FLAGS if f in self.flags]


def read_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """Parse the text of ``/proc/cpuinfo`` into ``(model name, flags)``.

    The first ``model name`` (x86) or ``Hardware``/``CPU part`` line names the model; the
    flags are the union over all processors (``flags`` on x86, ``Features`` on ARM).
    """
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "Hardware" and not model:
            model = value.strip()
        elif key in ("flags", "Features"):
            flags.update(value.lower().split())
    return model, frozenset(flags)


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """The CPU of this machine (read once per process; never raises)."""
    machine = platform.machine() or "unknown"
    model, flags, source = "", frozenset(), "unavailable"
    if os.path.exists("/proc/cpuinfo"):
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
                model, flags = read_cpuinfo(handle.read())
            source = "/proc/cpuinfo"
        except OSError:
            pass
    return CpuInfo(model=model or platform.processor() or "unknown", machine=machine, flags=flags, source=source)


def usable_cores() -> int:
    """The CPUs this process may run on: its affinity mask where the system has one, else every CPU."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
