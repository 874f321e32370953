"""The ONNX encoder runtime on tiny graphs built here (no weights, no torch)."""

from __future__ import annotations

import json

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import DIM, expected, make_bundle, table, write_model, write_tokenizer  # noqa: E402

from meteora_edge import MeteoraSelector  # noqa: E402
from meteora_edge.models.encoders import HashingEncoder, embed  # noqa: E402
from meteora_edge.errors import BundleError, ConfigError, MissingExtraError, ModelError  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder, load_encoder  # noqa: E402
from meteora_edge.models.onnx_session import create_session, encode_padded, load_tokenizer  # noqa: E402

TEXTS = [
    "either party may terminate",
    "fees",
    "the supplier shall deliver the goods after written notice days",
    "",
    "data ends",
    "unknownword monthly",
    "the agreement ends after the notice",
]


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    return write_model(tmp_path / "model.onnx"), write_tokenizer(tmp_path / "tokenizer.json")


@pytest.mark.parametrize(("batch_size", "max_batch_tokens"), [(1, 512), (2, 512), (3, 512), (8, 512), (64, 512),
                                                              (8, 1), (8, 12), (64, 24)])
def test_matches_numpy_reference_in_input_order(tiny, batch_size, max_batch_tokens):
    encoder = OnnxEncoder(*tiny, batch_size=batch_size, max_batch_tokens=max_batch_tokens)
    got = encoder.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), DIM)
    np.testing.assert_allclose(got, expected(TEXTS), rtol=1e-5, atol=1e-6)


def test_truncates_at_max_length_and_ignores_the_files_padding(tiny):
    long_text = " ".join(["fees"] * 3 + ["notice"] * 30)
    encoder = OnnxEncoder(*tiny, max_length=5)
    np.testing.assert_allclose(encoder.encode([long_text]), expected([long_text], max_length=5), atol=1e-6)
    # the shipped file truncates at 6 and pads to 16; the runtime truncates at 20 and pads dynamically
    tokenizer = load_tokenizer(tiny[1], max_length=20)
    ids, mask = encode_padded(tokenizer, ["fees", "fees are due"])
    assert ids.shape == (2, 5) and mask.sum(axis=1).tolist() == [3, 5]
    ids, _ = encode_padded(tokenizer, [long_text])
    assert ids.shape == (1, 20)


def test_padding_does_not_change_an_embedding(tiny):
    encoder = OnnxEncoder(*tiny, batch_size=4)
    alone = encoder.encode(["fees"])
    padded = encoder.encode(["fees", "the supplier shall deliver the goods after written notice"])[0]
    np.testing.assert_allclose(alone[0], padded, atol=1e-6)


@pytest.mark.parametrize("with_types", [False, True])
def test_feeds_only_the_inputs_the_graph_declares(tmp_path, with_types):
    model = write_model(tmp_path / "m.onnx", token_type_ids=with_types)
    encoder = OnnxEncoder(model, write_tokenizer(tmp_path / "t.json"))
    assert ("token_type_ids" in encoder.input_names) is with_types
    want = expected(TEXTS[:3], type_offset=0.5 if with_types else 0.0)
    np.testing.assert_allclose(encoder.encode(TEXTS[:3]), want, rtol=1e-5, atol=1e-6)


def test_int32_inputs_are_fed_as_int32(tmp_path):
    from onnx import TensorProto

    model = write_model(tmp_path / "m.onnx", int_type=TensorProto.INT32)
    encoder = OnnxEncoder(model, write_tokenizer(tmp_path / "t.json"))
    np.testing.assert_allclose(encoder.encode(TEXTS[:2]), expected(TEXTS[:2]), atol=1e-6)


def test_cls_pooling_and_no_normalisation(tiny):
    cls = OnnxEncoder(*tiny, pooling="cls").encode(["fees due"])
    np.testing.assert_allclose(cls, expected(["fees due"], pooling="cls"), atol=1e-6)
    raw = OnnxEncoder(*tiny, normalize=False).encode(["fees due"])
    E = table()
    np.testing.assert_allclose(raw[0], E[[2, 8, 10, 3]].mean(axis=0), atol=1e-6)


def test_empty_batch_and_bad_items(tiny):
    encoder = OnnxEncoder(*tiny)
    assert encoder.encode([]).shape == (0, DIM)
    with pytest.raises(ConfigError, match=r"texts\[1\] is int"):
        encoder.encode(["fees", 3])  # type: ignore[list-item]


def test_does_not_mutate_the_callers_list(tiny):
    texts = ["notice", "fees are due monthly", "data"]
    before = list(texts)
    OnnxEncoder(*tiny, batch_size=2).encode(texts)
    assert texts == before


def test_plugs_into_the_selector_and_embed(tiny):
    encoder = OnnxEncoder(*tiny)
    assert embed(encoder, ["fees"]).shape == (1, DIM)
    result = MeteoraSelector(encoder, expansion_window=0).select([t for t in TEXTS if t], ["either party may terminate"])
    assert 0 in result.selected_indices


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threads": 0}, "threads must be a positive integer"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"max_length": -1}, "max_length must be a positive integer"),
        ({"max_batch_tokens": 0}, "max_batch_tokens must be a positive integer"),
        ({"pooling": "max"}, "pooling must be one of mean, cls"),
    ],
)
def test_bad_options_are_refused(tiny, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        OnnxEncoder(*tiny, **kwargs)


def test_corrupt_model_missing_model_and_missing_tokenizer(tmp_path, tiny):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not a protobuf at all" * 10)
    with pytest.raises(ModelError, match="onnxruntime cannot load .*bad.onnx.*re-export"):
        OnnxEncoder(bad, tiny[1])
    with pytest.raises(ModelError, match="ONNX model not found"):
        OnnxEncoder(tmp_path / "nope.onnx", tiny[1])
    with pytest.raises(BundleError, match="tokenizer file not found"):
        OnnxEncoder(tiny[0], tmp_path / "nope.json")
    junk = tmp_path / "junk.json"
    junk.write_text("{\"not\": \"a tokenizer\"}")
    with pytest.raises(BundleError, match="cannot read tokenizer"):
        OnnxEncoder(tiny[0], junk)


def test_dimension_mismatch_with_the_manifest_is_refused(tmp_path, tiny):
    with pytest.raises(BundleError, match="8-dimensional vectors but the manifest says 16"):
        OnnxEncoder(*tiny, dimension=16)
    symbolic = write_model(tmp_path / "sym.onnx", output_dim="hidden")
    assert OnnxEncoder(symbolic, tiny[1]).dimension == DIM  # probed when the graph does not say


def test_not_a_feature_extraction_graph(tmp_path, tiny):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["input_ids"], ["out"], keepdims=0)], "g",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("out", TensorProto.INT64, ["b"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "sum.onnx"))
    with pytest.raises(ModelError, match="expected \\(batch, sequence, dimension\\)"):
        OnnxEncoder(tmp_path / "sum.onnx", tiny[1])


def test_from_bundle_identity_precision_and_settings(tmp_path):
    bundle = make_bundle(tmp_path / "b", settings={"max_length": 4}, dot=True)
    fp32 = OnnxEncoder.from_bundle(bundle, precision="fp32")
    int8 = OnnxEncoder.from_bundle(bundle, precision="int8")
    dot = OnnxEncoder.from_bundle(bundle, precision="int8-dot")
    assert fp32.identity.startswith("onnx:tiny-test-encoder:") and fp32.identity.endswith(":fp32")
    assert int8.identity.endswith(":int8") and dot.identity.endswith(":int8-dot") and fp32.max_length == 4
    assert dot.model_path.name == "model.int8-dot.onnx"
    assert int8.precision_choice == {"requested": "int8", "precision": "int8", "reason": "asked for"}
    text = "fees are due monthly after notice"
    np.testing.assert_allclose(fp32.encode([text]), expected([text], max_length=4), atol=1e-6)


def test_from_bundle_without_the_requested_precision(tmp_path):
    bundle = make_bundle(tmp_path / "b", int8=False)
    with pytest.raises(BundleError, match="has no int8 encoder \\(it has: fp32\\); use --precision auto"):
        OnnxEncoder.from_bundle(bundle, precision="int8")
    with pytest.raises(ConfigError, match="precision must be one of auto, fp32, int8, int8-dot"):
        OnnxEncoder.from_bundle(bundle, precision="fp16")
    assert OnnxEncoder.from_bundle(bundle).identity.endswith(":fp32")  # auto takes what there is


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"pooling": "max"}, "unknown pooling 'max'"),
        ({"max_length": "long"}, "max_length must be a positive integer"),
        ({"dimension": 0}, "dimension must be a positive integer"),
        ({"pad_id": -1}, "pad_id must be a non-negative integer"),
    ],
)
def test_from_bundle_refuses_nonsense_settings(tmp_path, settings, message):
    with pytest.raises(BundleError, match=message):  # the exporter never writes such a manifest ...
        make_bundle(tmp_path / "new", settings=settings)
    bundle = make_bundle(tmp_path / "b")  # ... and an edited one is refused on load
    manifest_path = bundle / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["components"]["encoder"]["settings"].update(settings)
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=message):
        OnnxEncoder.from_bundle(bundle, precision="fp32")


def test_identity_of_explicit_paths_hashes_the_model(tiny):
    first = OnnxEncoder(*tiny).identity
    assert first.startswith("onnx:model.onnx:") and len(first.split(":")[2]) == 12


def test_load_encoder(tmp_path):
    assert isinstance(load_encoder(None), HashingEncoder)
    encoder = load_encoder(str(make_bundle(tmp_path / "b")), threads=2, precision="fp32")
    assert isinstance(encoder, OnnxEncoder) and encoder.threads == 2


def test_missing_extra_names_the_pip_install(monkeypatch, tiny):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingExtraError, match=r'pip install "meteora-edge\[onnx\]"'):
        create_session(tiny[0])
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingExtraError, match=r"'tokenizers' is not installed"):
        load_tokenizer(tiny[1], max_length=8)


def test_session_options_are_checked(tiny):
    with pytest.raises(ConfigError, match="optimization must be one of"):
        create_session(tiny[0], optimization="max")
    session = create_session(tiny[0], threads=2, optimization="basic")
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask"]


def test_runtime_encode_path_never_imports_torch(tmp_path):
    bundle = make_bundle(tmp_path / "b")
    code = (
        "import sys\n"
        "import meteora_edge\n"
        "from meteora_edge.models.onnx_encoder import OnnxEncoder\n"
        f"enc = OnnxEncoder.from_bundle({str(bundle)!r})\n"
        "assert enc.encode(['fees are due']).shape == (1, 8)\n"
        "assert 'onnxruntime' in sys.modules\n"
        "bad = [m for m in ('torch', 'transformers', 'optimum', 'sentence_transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_importing_meteora_edge_does_not_import_onnxruntime():
    code = "import sys, meteora_edge, meteora_edge.models.onnx_encoder\nassert 'onnxruntime' not in sys.modules\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
