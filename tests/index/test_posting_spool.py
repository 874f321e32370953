"""A build's BM25 postings, spooled and merged in bounded blocks, give the very files (and so the very
scores) of the in-memory construction, whatever the block and pass sizes."""

import io
import json
import random
from contextlib import contextmanager

import numpy as np
import pytest

from meteora_edge import HashingEncoder, LocalIndex
from meteora_edge.errors import ConfigError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.posting_spool import PostingSpool
from meteora_edge.models.analyzer import DEFAULT_ANALYZER, LEGACY_ANALYZER
from meteora_edge.models.bm25 import BM25_VOCAB, BM25Index

WORDS = ["notice", "terminate", "party", "ninety", "days", "Zürich", "über", "fee", "the", "of", "a", "late", "pay"]


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = [" ".join(rng.choices(WORDS + [f"w{i}" for i in range(40)], k=rng.randint(1, 25))) for _ in range(n)]
    texts[3] = ""  # a document without a term
    texts[5] = "the the the"  # only a stop word (no term for the english analyser)
    return texts


class BytesWriter:
    """Collects the files a GenerationWriter would write, as bytes."""

    def __init__(self):
        self.files = {}

    @contextmanager
    def stream(self, name):
        out = io.BytesIO()
        yield out
        self.files[name] = out.getvalue()

    def write_array(self, name, array):
        with self.stream(name) as out:
            np.save(out, array, allow_pickle=False)

    def write_bytes(self, name, data):
        self.files[name] = bytes(data)


def in_memory_files(index: BM25Index) -> dict[str, bytes]:
    writer = BytesWriter()
    for name, array in index.arrays().items():
        writer.write_array(name, array)
    writer.write_bytes(BM25_VOCAB, json.dumps(index.vocab_document(), ensure_ascii=False).encode("utf-8"))
    return writer.files


@pytest.mark.parametrize("analyzer", [DEFAULT_ANALYZER, LEGACY_ANALYZER], ids=["english", "unicode-words"])
@pytest.mark.parametrize("block, passes", [(1, 1), (3, 7), (50, 2), (1 << 21, 1 << 21)])
def test_segmented_postings_write_the_same_bytes_as_the_in_memory_index(tmp_path, analyzer, block, passes):
    texts = corpus(300)
    writer = BytesWriter()
    with PostingSpool(analyzer, tmp_path, block_postings=block, pass_postings=passes) as spool:
        for text in texts:
            spool.add_text(text)
        spool.write(writer, prefix="")
    assert writer.files == in_memory_files(BM25Index.from_texts(texts, analyzer=analyzer))


def test_a_prefix_names_every_file(tmp_path):
    writer = BytesWriter()
    with PostingSpool(DEFAULT_ANALYZER, tmp_path) as spool:
        spool.add_text("late fee")
        spool.write(writer, prefix="delta_")
    assert sorted(writer.files) == sorted(f"delta_{name}" for name in in_memory_files(BM25Index.empty()))


def test_no_document_at_all_writes_an_empty_index(tmp_path):
    writer = BytesWriter()
    with PostingSpool(DEFAULT_ANALYZER, tmp_path, block_postings=2) as spool:
        spool.write(writer)
    assert writer.files == in_memory_files(BM25Index.from_texts([]))


def test_a_build_with_tiny_blocks_scores_as_one_with_the_default_blocks(tmp_path, monkeypatch):
    """The whole build path: the index files and every query's scores are identical."""
    docs = [SourceDocument(str(i), text, {}) for i, text in enumerate(corpus(200, seed=1)) if text]
    whole = LocalIndex.build(tmp_path / "whole", docs, HashingEncoder(), chunk_size=8, overlap=2)
    monkeypatch.setattr("meteora_edge.index.posting_spool.BLOCK_POSTINGS", 5)
    monkeypatch.setattr("meteora_edge.index.posting_spool.PASS_POSTINGS", 3)
    parts = LocalIndex.build(tmp_path / "parts", docs, HashingEncoder(), chunk_size=8, overlap=2)
    files = [n for n in whole.manifest["files"] if n.startswith("bm25_")] + ["chunks.jsonl", "chunk_offsets.npy",
                                                                              "vectors.npy"]
    for name in files:
        assert (whole.folder / name).read_bytes() == (parts.folder / name).read_bytes(), name
    texts = [r["text"] for r in whole.records(range(len(whole)))]
    expected = BM25Index.from_texts(texts)
    for query in ["terminate the party", "Zürich über late fee", "w3 w7 w7 days", "nothing matches"]:
        assert np.array_equal(parts.bm25.text_scores(query), expected.text_scores(query))
        assert np.array_equal(parts.lexical_scores(query, [7, 0, 3]), expected.text_scores(query)[[7, 0, 3]])


def test_weights_computed_per_term_equal_the_whole_index_computation():
    """Query-time weights (one term's postings at a time) are bit for bit the float32 weights the
    index once computed for all postings at load."""
    index = BM25Index.from_texts(corpus(300))
    n = index.n_docs
    df = np.diff(index.term_ptr).astype(np.float64)
    idf = np.log(n - df + 0.5) - np.log(df + 0.5)
    idf[idf < 0] = index.epsilon * idf.sum() / idf.size
    tf = index.tf.astype(np.float64)
    norm = index.k1 * (1 - index.b + index.b * index.doc_len[index.doc_ids] / (index.doc_len.sum() / n))
    whole = (np.repeat(idf, np.diff(index.term_ptr)) * tf * (index.k1 + 1) / (tf + norm)).astype(np.float32)
    per_term = np.concatenate([index.term_weights(t) for t in range(len(index.vocab))])
    assert per_term.dtype == np.float32 and per_term.tobytes() == whole.tobytes()


@pytest.mark.parametrize("block, passes", [(0, 1), (1, 0), (-5, 10)])
def test_block_sizes_below_one_are_refused(tmp_path, block, passes):
    with pytest.raises(ConfigError, match=f"got {block} and {passes}"):
        PostingSpool(DEFAULT_ANALYZER, tmp_path, block_postings=block, pass_postings=passes)


def test_recent_term_weights_are_reused_within_a_bound(monkeypatch):
    """Weights of queried terms are kept (a repeated query computes nothing) up to _RECENT_POSTINGS
    postings; past the bound the kept ones are dropped, and scores never change."""
    monkeypatch.setattr("meteora_edge.models.bm25._RECENT_POSTINGS", 150)
    index = BM25Index.from_texts(corpus(300))
    fresh = BM25Index.from_texts(corpus(300))
    first = index.text_scores("Zürich über")
    assert index._recent and all(not w.flags.writeable for w in index._recent.values())
    kept = dict(index._recent)
    assert np.array_equal(index.text_scores("Zürich über"), first)
    assert all(index._recent[t] is w for t, w in kept.items())  # reused, not recomputed
    for query in ("fee", "late pay", "days ninety", "w1 w2", "w3", "terminate the party notice", "Zürich über"):
        assert np.array_equal(index.text_scores(query), fresh.text_scores(query))
        assert sum(w.size for w in index._recent.values()) <= 150
