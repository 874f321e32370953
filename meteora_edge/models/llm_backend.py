"""llama.cpp itself: imported with its native log routed, its CPU backend loaded and named.

:func:`import_llama_cpp` is the way in to llama-cpp-python: a missing extra is a
:class:`~meteora_edge.errors.MissingExtraError`, and llama.cpp's own log lines reach stderr
only after :func:`set_llama_verbose` ``(True)``. The GGUF model (``llm_model``) and the token
counter build on it; this module imports neither.

llama.cpp picks its CPU kernels at run time when llama-cpp-python was built with
``GGML_BACKEND_DL=ON`` and ``GGML_CPU_ALL_VARIANTS=ON`` (what ``scripts/install-llama-cpp.sh``
builds): one ``libggml-cpu-<level>.so`` per instruction-set level sits beside ``libggml``, and
someone must load the best one before a model can load (llama.cpp otherwise answers "no
backends are loaded"). :func:`cpu_backend` does that once per process, through
llama-cpp-python's own ctypes library handle, and says which variant runs. Builds with the
CPU code linked in need nothing.

Example:
    >>> cpu_backend()["dispatch"]  # doctest: +SKIP
    'runtime'
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, ModelError

__all__ = ["UNSAFE_VARIANTS", "best_variant", "cpu_backend", "import_llama_cpp", "llama_verbose", "set_llama_verbose"]

logger = logging.getLogger(__name__)

_native = {"verbose": False, "callback": None}


def set_llama_verbose(verbose: bool) -> None:
    """Show llama.cpp's own log lines on stderr (``True``), or keep them quiet (the default)."""
    _native["verbose"] = bool(verbose)


def llama_verbose() -> bool:
    """Whether llama.cpp's own log lines are shown (see :func:`set_llama_verbose`)."""
    return bool(_native["verbose"])


def import_llama_cpp() -> Any:
    """Import llama-cpp-python with llama.cpp's native logging routed through this module.

    llama.cpp writes its own lines (model metadata, ``n_ctx_seq (512) > n_ctx_train (0)`` when
    a GGUF serves as a tokenizer) even with ``verbose=False``; they reach stderr only after
    :func:`set_llama_verbose` ``(True)`` (the CLI's ``--verbose``).

    Raises:
        MissingExtraError: llama-cpp-python is not installed.
    """
    try:
        import llama_cpp
    except ImportError:
        raise MissingExtraError("llama_cpp", "llm") from None
    if _native["callback"] is None and hasattr(llama_cpp, "llama_log_set"):
        import sys

        @llama_cpp.llama_log_callback
        def forward(level: int, text: bytes, user_data: Any) -> None:
            if _native["verbose"]:
                sys.stderr.write(text.decode("utf-8", errors="replace"))
                sys.stderr.flush()

        llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))
        _native["callback"] = forward  # keep the C callback alive
    return llama_cpp


_BACKEND_LOCK = threading.Lock()
_BACKEND: dict[str, Any] | None = None
_VARIANT_FILE = re.compile(r"(?:lib)?ggml-cpu-([A-Za-z0-9_.]+)\.(?:so|dll|dylib)$")
# CPU levels never loaded, with the reason. sapphirerapids: in llama-cpp-python 0.3.36 its AMX
# kernels stop the process with an illegal instruction on a Xeon whose kernel grants AMX
# (observed: family 6 model 167, amx_int8; llama.cpp pull request #26954 describes the fault), so
# an AMX CPU runs the next level down (icelake: AVX512-VNNI), which llama.cpp scores second.
UNSAFE_VARIANTS = {"sapphirerapids": "its AMX kernels stop the process with an illegal instruction"}


def cpu_backend() -> dict[str, Any]:
    """Make sure llama.cpp has a CPU backend, and say which one.

    With a runtime-dispatch build (``libggml-cpu-*.so`` files beside ``libggml``) and no
    backend registered yet, the variant that scores best on this CPU (:func:`best_variant`, the
    score llama.cpp's own loader asks each library for) is loaded, never one of
    :data:`UNSAFE_VARIANTS`. Runs once per process.

    Returns:
        ``{"dispatch": "runtime" | "built-in", "variant": name or None, "variants": [...],
        "skipped": {level: reason}}``: ``variant`` is the loaded level (e.g. ``icelake``,
        ``haswell``; when another part of the process loaded a backend first, read from the
        process's memory map where the system has one, else None); ``skipped`` names the
        levels present but never loaded (:data:`UNSAFE_VARIANTS`).

    Raises:
        MissingExtraError: llama-cpp-python is not installed.
        ModelError: a runtime-dispatch build in which no variant could be loaded.
    """
    global _BACKEND
    with _BACKEND_LOCK:
        if _BACKEND is None:
            _BACKEND = _load_cpu_backend()
        return dict(_BACKEND)


def _load_cpu_backend() -> dict[str, Any]:
    llama_cpp = import_llama_cpp()  # llama.cpp's log lines ("loaded CPU backend …") stay quiet
    from llama_cpp import llama_cpp as bindings

    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    variants = sorted(m.group(1) for f in lib_dir.glob("*ggml-cpu-*") if (m := _VARIANT_FILE.search(f.name)))
    if not variants:
        return {"dispatch": "built-in", "variant": None, "variants": [], "skipped": {}}
    # Through libllama's own handle: symbol lookup follows its dependencies, so this reaches the
    # libggml instance llama.cpp uses (a wheel holds copies, not symlinks, of libggml.so and
    # libggml.so.0, so opening "libggml.so" by name could give a second registry).
    ggml = bindings._lib
    ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
    ggml.ggml_backend_dev_count.argtypes = []
    chosen = None
    if ggml.ggml_backend_dev_count() == 0:
        chosen = best_variant(lib_dir)
        if chosen is not None:
            ggml.ggml_backend_load.restype = ctypes.c_void_p
            ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
            ggml.ggml_backend_load(os.fsencode(chosen[1]))
    if ggml.ggml_backend_dev_count() == 0:
        raise ModelError(
            f"llama.cpp loaded none of its CPU backends from {lib_dir} ({', '.join(variants)}); "
            "reinstall llama-cpp-python with scripts/install-llama-cpp.sh"
        )
    loaded = chosen[0] if chosen is not None else _mapped_variant()
    logger.info("llama.cpp CPU backend: %s (of %s)", loaded or "unknown", ", ".join(variants))
    skipped = {v: UNSAFE_VARIANTS[v] for v in variants if v in UNSAFE_VARIANTS}
    return {"dispatch": "runtime", "variant": loaded, "variants": variants, "skipped": skipped}


def best_variant(lib_dir: Path) -> tuple[str, Path] | None:
    """The CPU level in ``lib_dir`` that scores highest on this CPU, skipping :data:`UNSAFE_VARIANTS`.

    Each ``libggml-cpu-<level>`` library says through ``ggml_backend_score`` how well it fits
    the running CPU (0: it cannot run here), as llama.cpp's own loader asks; ties keep the
    first level in name order. Returns ``(level, path)``, or None when no level can run here.
    """
    best: tuple[int, str, Path] | None = None
    for path in sorted(lib_dir.glob("*ggml-cpu-*")):
        match = _VARIANT_FILE.search(path.name)
        if not match or match.group(1) in UNSAFE_VARIANTS:
            continue
        score = _variant_score(path)
        if score > 0 and (best is None or score > best[0]):
            best = (score, match.group(1), path)
    return None if best is None else (best[1], best[2])


def _variant_score(path: Path) -> int:
    """``ggml_backend_score()`` of one CPU-level library (0 when it cannot be opened or scored)."""
    import _ctypes

    try:
        library = ctypes.CDLL(str(path), mode=getattr(os, "RTLD_LOCAL", 0))
    except OSError:
        return 0
    try:
        score = getattr(library, "ggml_backend_score", None)
        if score is None:
            return 0
        score.restype, score.argtypes = ctypes.c_int, []
        return int(score())
    finally:
        if hasattr(_ctypes, "dlclose"):
            _ctypes.dlclose(library._handle)


def _mapped_variant() -> str | None:
    """The ``ggml-cpu-<level>`` library mapped into this process (Linux), else None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                match = _VARIANT_FILE.search(line.strip())
                if match:
                    return match.group(1)
    except OSError:
        pass
    return None
