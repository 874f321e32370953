"""The slow tier takes llama.cpp's converter from the set-up cache and never downloads it.

``scripts/setup-dev.sh`` fetches the converter once; ``scripts/test.sh`` sets
``METEORA_EDGE_OFFLINE_TESTS=1``, under which an empty cache fails instead of calling pip.
The slow test converts the tiny Llama with the cached converter inside a network namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import converter_cache
from converter_cache import ConverterNotCached, cached_converter


@pytest.fixture
def no_pip(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Record every subprocess the export module would start (pip download among them)."""
    import meteora_edge.export.llm as llm_export

    calls: list[list[str]] = []

    def record(args, **kwargs):
        calls.append(list(args))
        raise AssertionError(f"a download was attempted: {args}")

    monkeypatch.setattr(llm_export.subprocess, "run", record)
    return calls


def test_an_empty_cache_fails_instead_of_downloading(tmp_path, monkeypatch, no_pip):
    monkeypatch.setenv("METEORA_EDGE_OFFLINE_TESTS", "1")
    with pytest.raises(ConverterNotCached, match="run scripts/setup-dev.sh"):
        cached_converter(tmp_path / "empty")
    assert no_pip == []
    assert not (tmp_path / "empty").exists()


def test_a_filled_cache_is_used_as_it_is(tmp_path, monkeypatch, no_pip):
    monkeypatch.setenv("METEORA_EDGE_OFFLINE_TESTS", "1")
    cache = tmp_path / "convert"
    (cache / "gguf-py" / "gguf").mkdir(parents=True)
    (cache / "convert_hf_to_gguf.py").write_text("# stand-in\n")
    (cache / ".complete").write_text("llama-cpp-python test\n")
    assert cached_converter(cache) == cache
    assert no_pip == []


def test_the_cache_is_resolved_before_the_per_test_home():
    assert not str(converter_cache.CACHE).startswith(os.environ["HOME"])


def _can_unshare() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare(), reason="unshare -n is not permitted here")
def test_the_cached_converter_converts_inside_a_network_namespace(tiny_llama, tmp_path):
    pytest.importorskip("llama_cpp")
    env = {**os.environ, "METEORA_EDGE_OFFLINE_TESTS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "METEORA_EDGE_CACHE": str(converter_cache.CACHE.parents[1])}  # HOME is a fresh one per test
    find = subprocess.run(["unshare", "-n", sys.executable, "-c",
                           "from converter_cache import cached_converter; print(cached_converter())"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert find.returncode == 0, find.stderr
    folder = find.stdout.strip()
    bundle = tmp_path / "bundle"
    run = subprocess.run(["unshare", "-n", sys.executable, "-m", "meteora_edge.cli.main", "export", "llm",
                          str(tiny_llama), "--out", str(bundle), "--quant", "F16", "--llama-cpp", folder],
                         capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stderr
    assert "llm llm/model.F16.gguf (F16" in run.stdout
