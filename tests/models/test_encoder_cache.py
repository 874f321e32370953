"""The ONNX encoder with the embedding cache: callers get it without changes, a cached run
selects exactly what an uncached one does, and a bad entry is recomputed, never served."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import expected, make_bundle  # noqa: E402

from meteora_edge import MeteoraReranker, MeteoraSelector  # noqa: E402
from meteora_edge.errors import ConfigError  # noqa: E402
from meteora_edge.models.embedding_cache import CACHE_FILE, EmbeddingCache, text_digest  # noqa: E402
from meteora_edge.models.encoders import HashingEncoder  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder, load_encoder  # noqa: E402

CHUNKS = [
    "either party may terminate the agreement after written notice",
    "fees are due monthly",
    "the supplier shall deliver the goods",
    "data ends after the agreement ends",
    "notice days written",
]
RATIONALES = ["terminate agreement notice", "fees due"]


class Counting:
    """Counts the texts an encoder sends through its model."""

    def __init__(self, encoder: OnnxEncoder) -> None:
        self.texts: list[str] = []
        inner = encoder._encode

        def spy(texts: list[str]) -> np.ndarray:
            self.texts += texts
            return inner(texts)

        encoder._encode = spy  # type: ignore[method-assign]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "bundle")


def cache_rows(folder: Path) -> int:
    with sqlite3.connect(folder / CACHE_FILE) as conn:
        return conn.execute("SELECT count(*) FROM vectors_v1").fetchone()[0]


def test_from_bundle_uses_the_default_cache_when_asked_and_serves_repeats_from_it(bundle):
    encoder = OnnxEncoder.from_bundle(bundle, precision="fp32", cache=True)
    assert encoder.cache is not None and encoder.cache.folder == Path.home() / ".cache" / "meteora-edge"
    spy = Counting(encoder)
    first = encoder.encode(CHUNKS)
    again = encoder.encode(CHUNKS[::-1] + ["fees"])
    assert spy.texts.count(CHUNKS[0]) == 1 and sorted(spy.texts) == sorted(CHUNKS + ["fees"])
    np.testing.assert_array_equal(again[:5], first[::-1])
    np.testing.assert_allclose(first, expected(CHUNKS), rtol=1e-5, atol=1e-6)
    # another process (another encoder object) reads what this one wrote
    other = OnnxEncoder.from_bundle(bundle, precision="fp32", cache=EmbeddingCache(encoder.cache.folder))
    other_spy = Counting(other)
    np.testing.assert_array_equal(other.encode(CHUNKS), first)
    assert other_spy.texts == [] and other._session is None  # onnxruntime was never started
    other.encode(["a text nobody embedded yet"])
    assert other._session is not None


def test_duplicates_in_one_call_run_once(bundle, tmp_path):
    encoder = OnnxEncoder.from_bundle(bundle, precision="fp32", cache=tmp_path / "c")
    spy = Counting(encoder)
    out = encoder.encode(["fees", "fees", "notice", "fees"])
    assert spy.texts == ["fees", "notice"]
    np.testing.assert_array_equal(out[0], out[3])


def test_a_cached_selection_equals_an_uncached_one(bundle, tmp_path):
    uncached = MeteoraSelector(OnnxEncoder.from_bundle(bundle, cache=False), expansion_window=1)
    cached_encoder = OnnxEncoder.from_bundle(bundle, cache=tmp_path / "c")
    cached = MeteoraSelector(cached_encoder, expansion_window=1)
    want = uncached.select(CHUNKS, RATIONALES).to_dict()
    cold = cached.select(CHUNKS, RATIONALES).to_dict()
    spy = Counting(cached_encoder)
    warm = cached.select(CHUNKS, RATIONALES).to_dict()
    assert spy.texts == []  # every vector came from the cache
    assert cold == want and warm == want


def test_a_corrupt_entry_is_recomputed_and_rewritten(bundle, tmp_path):
    folder = tmp_path / "c"
    encoder = OnnxEncoder.from_bundle(bundle, precision="fp32", cache=folder)
    clean = encoder.encode(CHUNKS)
    victim = text_digest(CHUNKS[2])
    with sqlite3.connect(folder / CACHE_FILE) as conn:
        conn.execute("UPDATE vectors_v1 SET vector = zeroblob(length(vector)) WHERE digest = ?", (victim,))
    spy = Counting(encoder)
    np.testing.assert_array_equal(encoder.encode(CHUNKS), clean)
    assert spy.texts == [CHUNKS[2]]  # only the bad entry ran the model again ...
    spy.texts.clear()
    encoder.encode(CHUNKS)
    assert spy.texts == []  # ... and its entry is good again


def test_the_cache_key_changes_with_what_changes_a_vector(tmp_path):
    short = make_bundle(tmp_path / "short", settings={"max_length": 4})
    long = make_bundle(tmp_path / "long", settings={"max_length": 32})
    cache = EmbeddingCache(tmp_path / "c")
    a = OnnxEncoder.from_bundle(short, precision="fp32", cache=cache)
    b = OnnxEncoder.from_bundle(long, precision="fp32", cache=cache)
    assert a.cache_key != b.cache_key and a.cache_key.startswith("onnx-")
    text = "fees are due monthly after written notice"
    np.testing.assert_allclose(a.encode([text]), expected([text], max_length=4), atol=1e-6)
    np.testing.assert_allclose(b.encode([text]), expected([text], max_length=32), atol=1e-6)
    # an encoder built from paths derives the same key from the files and settings
    direct = OnnxEncoder(a.model_path, a.tokenizer_path, max_length=4, cache=cache)
    assert direct.cache_key == a.cache_key


def test_cache_off_writes_nothing(bundle, monkeypatch, tmp_path):
    home_cache = Path.home() / ".cache" / "meteora-edge"
    OnnxEncoder.from_bundle(bundle, cache=False).encode(CHUNKS)
    assert not home_cache.exists()
    monkeypatch.setenv("METEORA_EDGE_CACHE", "off")
    encoder = OnnxEncoder.from_bundle(bundle)
    assert encoder.cache is None
    encoder.encode(CHUNKS)
    assert not home_cache.exists()
    monkeypatch.setenv("METEORA_EDGE_CACHE", str(tmp_path / "elsewhere"))
    OnnxEncoder.from_bundle(bundle).encode(CHUNKS)
    assert cache_rows(tmp_path / "elsewhere") == len(CHUNKS) and not home_cache.exists()
    with pytest.raises(ConfigError, match="cache must be True, False, a folder or an EmbeddingCache"):
        OnnxEncoder.from_bundle(bundle, cache=3)  # type: ignore[arg-type]


def test_the_library_writes_nothing_derived_from_texts_unless_asked(bundle, monkeypatch, tmp_path):
    home_cache = Path.home() / ".cache" / "meteora-edge"
    for encoder in (OnnxEncoder.from_bundle(bundle), load_encoder(str(bundle))):
        assert encoder.cache is None
        encoder.encode(CHUNKS)
    MeteoraReranker(load_encoder(str(bundle))).filter("who may terminate the agreement", CHUNKS)
    assert not home_cache.exists()
    monkeypatch.setenv("METEORA_EDGE_CACHE", "on")  # the environment asks for the default folder
    assert OnnxEncoder.from_bundle(bundle).cache.folder == home_cache
    monkeypatch.setenv("METEORA_EDGE_CACHE", str(tmp_path / "asked"))
    assert OnnxEncoder.from_bundle(bundle).cache.folder == tmp_path / "asked"


def test_the_reranker_and_load_encoder_get_the_cache_without_changes(bundle):
    encoder = load_encoder(str(bundle), cache=True)
    assert isinstance(encoder, OnnxEncoder) and encoder.cache is not None
    MeteoraReranker(encoder).filter("who may terminate the agreement", CHUNKS)
    assert cache_rows(encoder.cache.folder) >= len(CHUNKS)
    spy = Counting(encoder)
    MeteoraReranker(encoder).filter("who may terminate the agreement", CHUNKS)
    assert spy.texts == []
    hashing = load_encoder(None)
    assert isinstance(hashing, HashingEncoder) and not hasattr(hashing, "cache")
