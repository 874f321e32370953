"""Fixtures for the server and adapter tests: a tiny ONNX bundle, an index built with it, chunks."""

from __future__ import annotations

import json
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
