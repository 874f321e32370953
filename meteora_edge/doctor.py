"""``doctor``: what this machine and installation can do, checked locally in a few seconds."""

from __future__ import annotations

import os
import platform
import time
from importlib import metadata
from typing import Any

from .errors import MeteoraError
from .models.cpu_features import cpu_info, usable_cores
from .models.encoders import HashingEncoder

__all__ = ["collect_report"]

_PACKAGES = ("meteora-edge", "numpy", "click", "onnxruntime", "tokenizers", "onnx", "safetensors", "llama-cpp-python",
             "rank-bm25", "matplotlib")
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "HF_HUB_OFFLINE")


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu() -> dict[str, Any]:
    info = cpu_info()
    return {
        "model": info.model,
        "cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "features": info.reported,
        "int8_dot_product": info.int8_dot,
        "flags_source": info.source,
    }


def _llm_extra() -> dict[str, Any]:
    try:
        import llama_cpp
    except ImportError as exc:
        return {"ok": False, "detail": f"llama_cpp not importable ({exc}); pip install \"meteora-edge[llm]\""}
    from .models.llm_backend import cpu_backend

    try:
        backend = cpu_backend()
    except MeteoraError as exc:
        return {"ok": False, "detail": str(exc)}
    info = llama_cpp.llama_print_system_info()
    text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
    return {"ok": True, "version": getattr(llama_cpp, "__version__", "?"), "cpu_backend": backend,
            "system_info": " ".join(text.split())[:400]}


def _cache(enabled: bool) -> dict[str, Any]:
    from .models.embedding_cache import CACHE_ENV, default_cache

    if not enabled:
        return {"state": "off (--no-cache)"}
    try:
        cache = default_cache()
    except MeteoraError as exc:
        return {"state": f"misconfigured: {exc}"}
    if cache is None:
        return {"state": f"off ({CACHE_ENV}={os.environ.get(CACHE_ENV)})"}
    return cache.stats()


def _encoder(bundle: Any, precision: str) -> dict[str, Any]:
    """Which encoder variant ``precision`` runs on this CPU, why, and each variant's parity."""
    from .models.precision import VARIANTS, choose_precision

    comp = bundle.components.get("encoder")
    if comp is None:
        return {"state": "no encoder component (the hashing encoder is used)"}
    variants = [v for v in VARIANTS if v in comp.files]
    if precision == "auto":
        chosen, reason = choose_precision(variants, report=comp.report)
    else:
        chosen, reason = precision, "asked for" if precision in variants else "MISSING from the bundle"
    parity = {v: comp.report[v] for v in variants if isinstance(comp.report.get(v), dict)}
    return {"variants": variants, "requested": precision, "precision": chosen, "reason": reason, "parity": parity}


def _lexical(bundle: Any) -> dict[str, Any]:
    """The lexical scorers a bundle offers: BM25 always, and its learned sparse model when it holds one."""
    found = next(((name, c) for name, c in bundle.components.items() if c.kind == "sparse_encoder"), None)
    if found is None:
        return {"scorers": ["bm25"], "sparse": None}
    name, comp = found
    return {"scorers": ["bm25", "sparse"], "sparse": {"component": name, "source": comp.source,
                                                      "variants": [v for v in ("fp32", "int8-dot", "int8") if v in comp.files],
                                                      "vocabulary": comp.settings.get("vocabulary")}}


def _index(path: str) -> dict[str, Any]:
    """An index's encoder and the lexical scorer it was built with (queries over it are scored the same way)."""
    from .index.corpus_index import open_index

    index = open_index(path)
    sparse = getattr(index, "sparse", None)
    return {"ok": True, "path": path, "encoder": index.encoder_id, "chunks": len(index),
            "lexical_scorer": getattr(index, "lexical_scorer", "bm25"),
            "sparse_model": getattr(sparse, "encoder_identity", None)}


def _probe(bundle: str | None, threads: int, precision: str) -> dict[str, Any]:
    texts = [f"probe sentence number {i} about termination notice and fees" for i in range(64)]
    t0 = time.perf_counter()
    HashingEncoder().encode(texts)
    out: dict[str, Any] = {"hashing_encode_64_ms": round((time.perf_counter() - t0) * 1000, 2)}
    if bundle:
        from .models.onnx_encoder import OnnxEncoder

        t0 = time.perf_counter()
        encoder = OnnxEncoder.from_bundle(bundle, threads=threads, precision=precision, cache=False)
        out["onnx_load_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["onnx_precision"] = encoder.precision_choice["precision"] if encoder.precision_choice else precision
        if encoder.precision_choice and "so fp32 runs" in encoder.precision_choice["reason"]:
            out["onnx_reason"] = encoder.precision_choice["reason"]  # the variant failed its check on this CPU
        encoder.encode(texts[:2])
        t0 = time.perf_counter()
        encoder.encode(texts)
        out["onnx_passages_per_s"] = round(len(texts) / (time.perf_counter() - t0), 1)
    return out


def collect_report(
    *, bundle: str | None = None, threads: int = 1, probe: bool = True, precision: str = "auto", cache: bool = True,
    index: str | None = None,
) -> dict[str, Any]:
    """Versions, CPU, thread settings, the embedding cache, the llm extra, bundle checks and a probe.

    Args:
        bundle: a bundle folder to check (files, and which encoder variant runs here).
        threads: threads of the probe's encoder.
        probe: time the hashing encoder (and the bundle's encoder) on 64 sentences.
        precision: the encoder precision to report on (``auto`` shows what it picks and why).
        cache: whether the embedding cache is in use (``--no-cache`` turns it off).
        index: an index (folder or ``milvus://`` URL) whose encoder and lexical scorer to report.

    Problems are reported in the result (``"ok": false`` with a detail), never raised, so
    the report is complete even on a broken installation.
    """
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "versions": _versions(),
        "cpu": _cpu(),
        "threads": {var: os.environ.get(var) for var in _THREAD_VARS},
        "cache": _cache(cache),
        "llm_extra": _llm_extra(),
    }
    if bundle:
        from .models.bundle import Bundle

        try:
            loaded = Bundle.load(bundle)
            report["bundle"] = {"ok": True, "path": bundle, "files": loaded.verify()}
            report["encoder"] = _encoder(loaded, precision)
            report["lexical"] = _lexical(loaded)
        except MeteoraError as exc:
            report["bundle"] = {"ok": False, "path": bundle, "detail": str(exc)}
    if probe:
        try:
            report["probe"] = _probe(bundle if report.get("bundle", {}).get("ok") else None, threads, precision)
        except MeteoraError as exc:
            report["probe"] = {"ok": False, "detail": str(exc)}
    if index:
        try:
            report["index"] = _index(index)
        except MeteoraError as exc:
            report["index"] = {"ok": False, "path": index, "detail": str(exc)}
    report["ok"] = report.get("bundle", {"ok": True})["ok"] and report.get("index", {"ok": True})["ok"]
    return report
