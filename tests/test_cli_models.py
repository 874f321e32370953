"""``models info|verify``, ``select --bundle`` and ``export encoder`` errors through click's CliRunner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402

from repo_paths import EXAMPLES
CHUNKS = ["either party may terminate", "fees are due monthly", "the supplier shall deliver the goods",
          "data ends after the agreement"]


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle")


@pytest.fixture
def chunks_file(tmp_path: Path) -> Path:
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(CHUNKS))
    return path


def test_models_info_text_and_json(bundle):
    result = run("models", "info", str(bundle))
    assert result.exit_code == 0, result.output
    assert "encoder: encoder from tiny-test-encoder, licence Apache-2.0" in result.output
    assert "int8: encoder/model.int8.onnx" in result.output and "parity fp32: min cosine 1.0" in result.output
    data = json.loads(run("models", "info", str(bundle), "--json").output)
    assert data["format_version"] == 1 and set(data["components"]["encoder"]["files"]) == {"fp32", "int8", "tokenizer"}


def test_models_verify_opens_each_precision(bundle):
    result = run("models", "verify", str(bundle))
    assert result.exit_code == 0, result.output
    assert "encoder/int8: ok, embeds to 8 dimensions" in result.output and "verified" in result.output
    data = json.loads(run("models", "verify", str(bundle), "--json").output)
    assert data["ok"] is True and data["files"]["encoder"]["tokenizer"] == "ok"


def test_models_verify_refuses_a_tampered_bundle_in_one_line(bundle):
    path = bundle / "encoder" / "model.onnx"
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))
    assert_one_line_error(run("models", "verify", str(bundle), "--hashes-only"), "model.onnx", "sha256", "re-copy")


@pytest.mark.parametrize("command", ["info", "verify"])
def test_models_commands_on_a_missing_bundle(tmp_path, command):
    assert_one_line_error(run("models", command, str(tmp_path / "nope")), "bundle directory not found")


def test_select_with_a_bundle_uses_the_onnx_encoder(bundle, chunks_file):
    result = run("select", "--chunks", str(chunks_file), "--rationale", "either party may terminate",
                 "--bundle", str(bundle), "--precision", "fp32", "--threads", "1", "--compact")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["encoder"].startswith("onnx:tiny-test-encoder:") and data["encoder"].endswith(":fp32")
    assert 0 in [p["id"] for p in data["passages"]]
    assert "hashing encoder" not in result.output  # no fallback note with a bundle


def test_select_takes_the_bundle_from_the_environment(bundle, chunks_file):
    result = run("select", "--chunks", str(chunks_file), "--rationale", "fees are due", "--compact",
                 "--precision", "int8", env={"METEORA_EDGE_BUNDLE": str(bundle)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["encoder"].endswith(":int8")


def test_select_with_a_bad_bundle_is_one_line(tmp_path, bundle, chunks_file):
    assert_one_line_error(
        run("select", "--chunks", str(chunks_file), "-q", "fees", "--bundle", str(tmp_path / "missing")),
        "bundle directory not found",
    )
    (bundle / "encoder" / "tokenizer.json").unlink()
    assert_one_line_error(
        run("select", "--chunks", str(chunks_file), "-q", "fees", "--bundle", str(bundle)),
        "tokenizer.json is missing from the bundle",
    )


def test_select_precision_missing_from_the_bundle(tmp_path, chunks_file):
    bundle = make_bundle(tmp_path / "b", int8=False)
    assert_one_line_error(run("select", "--chunks", str(chunks_file), "-q", "fees", "--bundle", str(bundle),
                              "--precision", "int8"),
                          "has no int8 encoder", "--precision auto")


def test_export_encoder_bad_source_is_one_line(tmp_path):
    assert_one_line_error(run("export", "encoder", "no-such-model-anywhere", "--out", str(tmp_path / "b")),
                          "not a folder, an installed model package or a hub id")
    assert not (tmp_path / "b").exists()


def test_export_encoder_refuses_a_non_bundle_folder(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    target = tmp_path / "occupied"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    assert_one_line_error(run("export", "encoder", str(model), "--out", str(target)),
                          "is not empty and holds no manifest.json")
    assert (target / "notes.txt").read_text() == "mine"


def test_export_encoder_without_the_export_extra_names_the_pip_install(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "optimum.exporters.onnx", None)
    result = run("export", "encoder", str(model), "--out", str(tmp_path / "b"))
    assert_one_line_error(result, 'pip install "meteora-edge[export]"')
    assert not (tmp_path / "b").exists()


def test_export_encoder_refuses_a_newer_bundle_before_any_work(tmp_path, bundle):
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["format_version"] = 7
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert_one_line_error(run("export", "encoder", str(model), "--out", str(bundle)), "format version 7", "upgrade")


def test_models_commands_take_the_bundle_from_the_environment(bundle):
    info = run("models", "info", env={"METEORA_EDGE_BUNDLE": str(bundle)})
    assert info.exit_code == 0 and "encoder from tiny-test-encoder" in info.output
    verify = run("models", "verify", "--hashes-only", env={"METEORA_EDGE_BUNDLE": str(bundle)})
    assert verify.exit_code == 0 and f"{bundle}: verified" in verify.output
    assert_one_line_error(run("models", "info", env={"METEORA_EDGE_BUNDLE": ""}), "METEORA_EDGE_BUNDLE")


def test_export_without_the_export_extra_names_the_extra_not_the_source(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    for command in ("encoder", "cross-encoder"):
        result = run("export", command, "no-such-owner/no-such-model", "--out", str(tmp_path / "b"))
        assert_one_line_error(result, "'torch' is not installed", 'pip install "meteora-edge[export]"')
        assert not (tmp_path / "b").exists()
