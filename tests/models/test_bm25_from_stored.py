"""A BM25 index from stored parts: documents without terms load, and its arrays always come out in the stored dtypes."""

from __future__ import annotations

import numpy as np

from meteora_edge.models.bm25 import BM25_ARRAYS, BM25Index


def _parts(index):
    return index.vocab_document(), [index.arrays()[name] for name, _ in BM25_ARRAYS]


def test_a_document_without_terms_is_stored_and_loads():
    """An empty chunk (length 0) is a valid document: it scores 0 and keeps the others' numbering."""
    built = BM25Index.build([["a", "b"], [], ["a"]])
    vocab, arrays = _parts(built)
    assert arrays[3].tolist() == [2, 0, 1]
    loaded = BM25Index.from_stored(vocab, *arrays, where="ix")
    assert loaded.n_docs == 3
    assert loaded.scores(["a"]).tolist() == built.scores(["a"]).tolist()
    assert loaded.scores(["a"])[1] == 0.0


def test_arrays_come_out_in_the_stored_dtypes_whatever_the_parts_were():
    term_ptr = np.array([0, 2, 3], dtype=">i4")
    doc_ids = np.array([0, 1, 1], dtype=np.int64)
    tf = np.array([1, 2, 1], dtype=np.int64)
    doc_len = np.array([1, 3], dtype=np.int16)
    index = BM25Index.from_stored({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "terms": ["a", "b"]},
                                  term_ptr, doc_ids, tf, doc_len, where="ix")
    arrays = index.arrays()
    assert list(arrays) == [name for name, _ in BM25_ARRAYS]
    assert [a.dtype for a in arrays.values()] == [dtype for _, dtype in BM25_ARRAYS]
    assert [a.tolist() for a in arrays.values()] == [[0, 2, 3], [0, 1, 1], [1, 2, 1], [1, 3]]
    assert all(a.flags.c_contiguous for a in arrays.values())


def test_extending_a_loaded_index_keeps_the_stored_dtypes_and_postings():
    vocab, arrays = _parts(BM25Index.build([["a", "b"], ["b"]]))
    extended = BM25Index.from_stored(vocab, *arrays, where="ix").extend([["c", "a"], []])
    out = extended.arrays()
    assert [a.dtype for a in out.values()] == [dtype for _, dtype in BM25_ARRAYS]
    assert extended.vocab == {"a": 0, "b": 1, "c": 2}
    assert out["bm25_term_ptr.npy"].tolist() == [0, 2, 4, 5]
    assert out["bm25_doc_ids.npy"].tolist() == [0, 2, 0, 1, 2]
    assert out["bm25_doc_len.npy"].tolist() == [2, 1, 2, 0]
    assert extended.scores(["a"]).tolist() == BM25Index.build([["a", "b"], ["b"], ["c", "a"], []]).scores(["a"]).tolist()
