"""``doctor``: what this machine and installation can do, checked locally in a few seconds."""

from __future__ import annotations

import os
import platform
import time
from importlib import metadata
from typing import Any

from .models.encoders import HashingEncoder
from .errors import MeteoraError

__all__ = ["collect_report"]

_PACKAGES = ("meteora-edge", "numpy", "click", "onnxruntime", "tokenizers", "llama-cpp-python", "rank-bm25", "matplotlib")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "HF_HUB_OFFLINE")
_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "neon", "asimd")


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu() -> dict[str, Any]:
    model, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("unknown", ""):
                    model = value.strip()
                elif key.strip() in ("flags", "Features"):
                    flags |= set(value.split())
    except OSError:
        pass
    return {
        "model": model,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "features": [f for f in _CPU_FLAGS if f in flags],
    }


def _llm_extra() -> dict[str, Any]:
    try:
        import llama_cpp
    except ImportError as exc:
        return {"ok": False, "detail": f"llama_cpp not importable ({exc}); pip install \"meteora-edge[llm]\""}
    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    return {"ok": True, "version": getattr(llama_cpp, "__version__", "?"), "system_info": " ".join(text.split())[:400]}


def _probe(bundle: str | None, threads: int) -> dict[str, Any]:
    texts = [f"probe sentence number {i} about termination notice and fees" for i in range(64)]
    t0 = time.perf_counter()
    HashingEncoder().encode(texts)
    out: dict[str, Any] = {"hashing_encode_64_ms": round((time.perf_counter() - t0) * 1000, 2)}
    if bundle:
        from .models.onnx_encoder import OnnxEncoder

        t0 = time.perf_counter()
        encoder = OnnxEncoder.from_bundle(bundle, threads=threads)
        out["onnx_load_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        encoder.encode(texts[:2])
        t0 = time.perf_counter()
        encoder.encode(texts)
        out["onnx_passages_per_s"] = round(len(texts) / (time.perf_counter() - t0), 1)
    return out


def collect_report(*, bundle: str | None = None, threads: int = 1, probe: bool = True) -> dict[str, Any]:
    """Versions, CPU, thread settings, the llm extra, bundle checks and a latency probe.

    Problems are reported in the result (``"ok": false`` with a detail), never raised, so
    the report is complete even on a broken installation.
    """
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "versions": _versions(),
        "cpu": _cpu(),
        "threads": {var: os.environ.get(var) for var in _THREAD_VARS},
        "llm_extra": _llm_extra(),
    }
    if bundle:
        from .models.bundle import Bundle

        try:
            loaded = Bundle.load(bundle)
            report["bundle"] = {"ok": True, "path": bundle, "files": loaded.verify()}
        except MeteoraError as exc:
            report["bundle"] = {"ok": False, "path": bundle, "detail": str(exc)}
    if probe:
        try:
            report["probe"] = _probe(bundle if report.get("bundle", {}).get("ok") else None, threads)
        except MeteoraError as exc:
            report["probe"] = {"ok": False, "detail": str(exc)}
    report["ok"] = report.get("bundle", {"ok": True})["ok"]
    return report
