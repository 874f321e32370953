"""A BM25 index from stored parts: documents without terms load, and its arrays always come out in the stored dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge.errors import LocalIndexError
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


# -- the checks read the postings a block at a time --------------------------------------------------
PARAMS = {"k1": 1.5, "b": 0.75, "epsilon": 0.25}
# terms a, b, c; postings a: 0 1 3 | b: 2 3 | c: 0 1 2 3
GOOD = ([0, 3, 5, 9], [0, 1, 3, 2, 3, 0, 1, 2, 3], [1, 2, 1, 1, 1, 3, 1, 1, 2], [4, 3, 2, 4])
GOOD_DOCS = [["a", "c", "c", "c"], ["a", "a", "c"], ["b", "c"], ["a", "b", "c", "c"]]


def _load(term_ptr, doc_ids, tf, doc_len, tmp_path=None):
    arrays = [np.asarray(a, dtype=dtype) for a, (_, dtype) in zip((term_ptr, doc_ids, tf, doc_len), BM25_ARRAYS)]
    if tmp_path is not None:  # memory-mapped, as an index loads them
        for (name, _), array in zip(BM25_ARRAYS, arrays):
            np.save(tmp_path / name, array)
        arrays = [np.load(tmp_path / name, mmap_mode="r") for name, _ in BM25_ARRAYS]
    return BM25Index.from_stored({"params": PARAMS, "terms": ["a", "b", "c"]}, *arrays, where="ix")


@pytest.mark.parametrize("block", [1, 2, 3, 4, 1 << 20])
@pytest.mark.parametrize("mapped", [False, True])
def test_checks_in_blocks_accept_a_good_index_and_score_it_the_same(monkeypatch, tmp_path, block, mapped):
    monkeypatch.setattr("meteora_edge.models.bm25._CHECK_BLOCK", block)
    index = _load(*GOOD, tmp_path if mapped else None)
    built = BM25Index.build(GOOD_DOCS)
    for query in (["a"], ["b", "c"], ["c", "a", "a"]):
        assert index.scores(query).tolist() == built.scores(query).tolist()


@pytest.mark.parametrize("block", [1, 2, 3, 4, 1 << 20])
@pytest.mark.parametrize("doc_ids, tf, message", [
    ([0, 1, 3, 2, 3, 0, 1, 3, 2], GOOD[2], "not sorted"),   # c's postings fall at the end (across blocks of 2)
    ([0, 1, 3, 3, 2, 0, 1, 2, 3], GOOD[2], "not sorted"),   # b's fall right at its start
    ([0, 1, 3, 2, 3, 0, 1, 2, 4], GOOD[2], "inconsistent"),  # a document outside the index, in the last block
    (GOOD[1], [1, 2, 1, 1, 1, 3, 1, 0, 2], "inconsistent"),  # a frequency of 0
])
def test_checks_in_blocks_find_a_fault_wherever_the_blocks_cut(monkeypatch, tmp_path, block, doc_ids, tf, message):
    monkeypatch.setattr("meteora_edge.models.bm25._CHECK_BLOCK", block)
    with pytest.raises(LocalIndexError, match=message):
        _load(GOOD[0], doc_ids, tf, GOOD[3], tmp_path)
