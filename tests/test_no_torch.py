"""The runtime must never pull in the heavy export-side libraries."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "optimum", "sentence_transformers")


def test_import_and_select_leave_torch_out_of_sys_modules():
    code = (
        "import sys\n"
        "import meteora_edge\n"
        "from meteora_edge import HashingEncoder, MeteoraReranker, MeteoraSelector\n"
        "MeteoraSelector(HashingEncoder()).select(['a b', 'c d'], ['a'])\n"
        "MeteoraReranker(HashingEncoder()).filter('a', ['a b', 'c d'])\n"
        f"bad = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# run in a fresh interpreter where importing torch, transformers or optimum fails outright, so a
# builder that reached for them (even inside a try) would be caught by the list below
_BLOCKED_INSTALL = (
    "import sys\n"
    f"for m in {HEAVY!r}: sys.modules[m] = None\n"
    "from meteora_edge.cli.main import main\n"
    "try:\n    main(sys.argv[1:])\n"
    "except SystemExit as e:\n    assert not e.code, e.code\n"
    "import meteora_edge.models.bert_graph, meteora_edge.models.checkpoint, meteora_edge.models.int8_variants\n"
    f"bad = [m for m in {HEAVY!r} if sys.modules.get(m) is not None]\n"
    "assert not bad, bad\n"
)


def test_models_install_builds_a_checkpoint_into_onnx_with_torch_unimportable(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("safetensors")
    from tiny_bert import catalog_entry, tensors, write_checkpoint

    site = tmp_path / "site"
    (site / "tiny_ckpt").mkdir(parents=True)
    (site / "tiny_ckpt" / "__init__.py").write_text("")
    write_checkpoint(site / "tiny_ckpt" / "model", tensors(mlm=True))
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"format": "meteora-edge-model-catalog", "format_version": 2, "models": [
        catalog_entry("tiny-splade", "sparse_encoder", site, "tiny_ckpt", variants=("int8", "int8-dot"))]}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _BLOCKED_INSTALL, "models", "install", "tiny-splade", "--bundle",
                           str(tmp_path / "b"), "--catalog", str(catalog), "--no-pip"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sparse_encoder tiny-splade (fp32, int8, int8-dot" in proc.stdout
    assert (tmp_path / "b" / "sparse_encoder" / "model.onnx").is_file()


@pytest.mark.slow
def test_every_catalog_encoder_installs_with_torch_unimportable(tmp_path):
    """The shipped encoders whose packages are installed here, ready (minilm-l6-v2-int8) and built from
    checkpoints (minilm-l6-v2, splade-tiny; mpnet-base-v2 when its five parts are installed)."""
    from meteora_edge.models.catalog import load_catalog

    encoders = [e for e in load_catalog() if e.role in ("encoder", "sparse_encoder")]
    assert {e.name for e in encoders} >= {"minilm-l6-v2", "minilm-l6-v2-int8", "splade-tiny", "mpnet-base-v2"}
    installed = []
    for entry in encoders:
        modules = [p.module for p in (*entry.parts, *entry.onnx.files.values()) if p.module]
        if any(importlib.util.find_spec(m) is None for m in modules):
            continue
        proc = subprocess.run([sys.executable, "-c", _BLOCKED_INSTALL, "models", "install", entry.name, "--bundle",
                               str(tmp_path / entry.name), "--no-pip"], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (entry.name, proc.stderr[-2000:])
        installed.append(entry.name)
    if not installed:
        pytest.skip("no catalog encoder's packages are installed (scripts/setup-dev.sh installs them)")
