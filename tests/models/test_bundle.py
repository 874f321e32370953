"""Bundles refuse anything that does not match their manifest, with a message that says the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from llm_fakes import write_gguf  # noqa: E402
from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge.models.bundle import MANIFEST_NAME, Bundle, Component, add_component, file_entry  # noqa: E402
from meteora_edge.errors import BundleError  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle")


def _manifest(root: Path) -> dict:
    return json.loads((root / MANIFEST_NAME).read_text())


def _write_manifest(root: Path, data: object) -> None:
    (root / MANIFEST_NAME).write_text(json.dumps(data))


def test_a_good_bundle_loads_and_verifies(bundle):
    assert Bundle.load(bundle).verify() == {"encoder": {"fp32": "ok", "int8": "ok", "tokenizer": "ok"}}
    assert OnnxEncoder.from_bundle(bundle).encode(["fees"]).shape == (1, 8)


def test_tampered_model_same_size_is_refused(bundle):
    path = bundle / "encoder" / "model.int8.onnx"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="does not match its sha256 .*tampered or corrupt; re-copy the bundle"):
        OnnxEncoder.from_bundle(bundle, precision="int8")
    OnnxEncoder.from_bundle(bundle, precision="fp32")  # the other file is still fine


def test_truncated_model_is_refused(bundle):
    path = bundle / "encoder" / "model.onnx"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(BundleError, match="has 100 bytes but the manifest says .*truncated"):
        OnnxEncoder.from_bundle(bundle, precision="fp32")


def test_missing_model_file_is_refused(bundle):
    (bundle / "encoder" / "model.int8.onnx").unlink()
    with pytest.raises(BundleError, match="model.int8.onnx is missing from the bundle"):
        OnnxEncoder.from_bundle(bundle, precision="int8")


def test_missing_tokenizer_file_is_refused(bundle):
    (bundle / "encoder" / "tokenizer.json").unlink()
    with pytest.raises(BundleError, match="tokenizer.json is missing from the bundle"):
        OnnxEncoder.from_bundle(bundle)


def test_manifest_without_a_tokenizer_is_refused(bundle):
    manifest = _manifest(bundle)
    del manifest["components"]["encoder"]["files"]["tokenizer"]
    _write_manifest(bundle, manifest)
    with pytest.raises(BundleError, match="lists no tokenizer file; re-export"):
        OnnxEncoder.from_bundle(bundle)


def test_newer_format_version_is_refused(bundle):
    manifest = _manifest(bundle)
    manifest["format_version"] = 99
    _write_manifest(bundle, manifest)
    with pytest.raises(BundleError, match="format version 99, newer than this meteora-edge reads .*upgrade"):
        OnnxEncoder.from_bundle(bundle)


@pytest.mark.parametrize("bad_path", ["../outside.onnx", "/etc/passwd", "encoder/../../x.onnx"])
def test_paths_outside_the_bundle_are_refused(bundle, bad_path):
    manifest = _manifest(bundle)
    manifest["components"]["encoder"]["files"]["fp32"]["path"] = bad_path
    _write_manifest(bundle, manifest)
    with pytest.raises(BundleError, match="points outside the bundle"):
        Bundle.load(bundle)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "is not a meteora-edge-bundle manifest"),
        ('{"format": "meteora-edge-bundle", "format_version": "one", "components": {}}', "invalid format_version"),
        ('{"format": "meteora-edge-bundle", "format_version": 1}', "has no 'components' object"),
        ('{"format": "meteora-edge-bundle", "format_version": 1, "components": {"encoder": {"kind": "encoder"}}}',
         "component 'encoder' is malformed"),
        ('{"format": "meteora-edge-bundle", "format_version": 1, "components": {"encoder": '
         '{"kind": "encoder", "files": {"fp32": {"path": "m.onnx", "sha256": "x"}}}}}', "lacks path/sha256/size"),
    ],
)
def test_malformed_manifests_are_refused(bundle, content, message):
    (bundle / MANIFEST_NAME).write_text(content)
    with pytest.raises(BundleError, match=message):
        OnnxEncoder.from_bundle(bundle)


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleError, match="bundle directory not found") as missing:
        OnnxEncoder.from_bundle(tmp_path / "nowhere")
    message = str(missing.value)  # a new user is pointed at the torch-free install first
    assert message.index("meteora-edge models install minilm-l6-v2") < message.index("meteora-edge export")
    with pytest.raises(BundleError, match="has no manifest.json; it is not a meteora-edge bundle"):
        OnnxEncoder.from_bundle(tmp_path)


def test_a_bundle_without_an_encoder_or_with_the_wrong_kind(bundle):
    (bundle / "llm").mkdir()
    write_gguf(bundle / "llm" / "tiny.gguf", {"general.architecture": "llama"})
    manifest = _manifest(bundle)
    manifest["components"] = {"llm": {"kind": "llm", "files": {"model": file_entry(bundle, "llm/tiny.gguf").to_dict()}}}
    _write_manifest(bundle, manifest)
    with pytest.raises(BundleError, match="has no 'encoder' component \\(it has llm\\)"):
        OnnxEncoder.from_bundle(bundle)
    with pytest.raises(BundleError, match="is a 'llm', not an encoder"):
        OnnxEncoder.from_bundle(bundle, component="llm")


def test_swapped_model_with_the_wrong_dimension_is_refused(tmp_path):
    bundle = make_bundle(tmp_path / "b", settings={"dimension": 16})
    with pytest.raises(BundleError, match="8-dimensional vectors but the manifest says 16"):
        OnnxEncoder.from_bundle(bundle, cache=False)
    # with a cache the model opens at the first text that is not cached, and is refused there
    lazy = OnnxEncoder.from_bundle(bundle, cache=True)
    with pytest.raises(BundleError, match="8-dimensional vectors but the manifest says 16"):
        lazy.encode(["fees"])


def test_add_component_keeps_the_other_components(bundle):
    (bundle / "llm").mkdir()
    write_gguf(bundle / "llm" / "tiny.gguf", {"general.architecture": "llama"})
    add_component(bundle, "llm", Component(kind="llm", files={"model": file_entry(bundle, "llm/tiny.gguf")}))
    loaded = Bundle.load(bundle)
    assert sorted(loaded.components) == ["encoder", "llm"]
    assert loaded.verify()["llm"] == {"model": "ok"}
