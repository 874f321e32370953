"""Machine and version header shared by the benchmark scripts."""

from __future__ import annotations

import os
import platform
from importlib import metadata


def machine_header(packages: tuple[str, ...] = ("numpy",)) -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = []
    for name in packages:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    return (
        f"machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()}\nversions: {', '.join(versions)}"
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    lo = int(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)
