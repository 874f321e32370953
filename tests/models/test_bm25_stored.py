"""A stored BM25 index: its parameters, its files and every inconsistency between them, refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

from meteora_edge.errors import ConfigError, LocalIndexError
from meteora_edge.models.bm25 import BM25_ARRAYS, BM25_VOCAB, BM25Index

DOCS = [["a", "b", "b"], ["b", "c"], ["a"]]


def _parts():
    index = BM25Index.build(DOCS)
    return index.vocab_document(), {name: a.copy() for name, a in index.arrays().items()}


def _from(vocab, arrays):
    return BM25Index.from_stored(vocab, *(arrays[name] for name, _ in BM25_ARRAYS), where="ix")


def test_the_stored_parts_are_exactly_the_postings():
    vocab, arrays = _parts()
    assert vocab == {"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "terms": ["a", "b", "c"]}
    assert arrays["bm25_term_ptr.npy"].tolist() == [0, 2, 4, 5]      # a: docs 0, 2; b: docs 0, 1; c: doc 1
    assert arrays["bm25_doc_ids.npy"].tolist() == [0, 2, 0, 1, 1]
    assert arrays["bm25_tf.npy"].tolist() == [1, 1, 2, 1, 1]
    assert arrays["bm25_doc_len.npy"].tolist() == [3, 2, 1]
    assert [a.dtype for a in arrays.values()] == [dtype for _, dtype in BM25_ARRAYS]
    assert _from(vocab, arrays).scores(["b"]).tolist() == BM25Index.build(DOCS).scores(["b"]).tolist()


def _set(name, fn):
    def change(arrays):
        arrays[name] = fn(arrays[name])
    return change


INCONSISTENT = {
    "term_ptr-2d": _set("bm25_term_ptr.npy", lambda a: a.reshape(1, -1)),
    "doc_len-2d": _set("bm25_doc_len.npy", lambda a: a.reshape(1, -1)),
    "term_ptr-too-short": _set("bm25_term_ptr.npy", lambda a: a[:-1]),
    "tf-shorter-than-doc_ids": _set("bm25_tf.npy", lambda a: a[:-1]),
    "term_ptr-not-from-0": _set("bm25_term_ptr.npy", lambda a: a + 1),
    "term_ptr-not-to-the-end": _set("bm25_term_ptr.npy", lambda a: np.array([0, 2, 4, 4])),
    "term_ptr-decreasing": _set("bm25_term_ptr.npy", lambda a: np.array([0, 4, 2, 5])),
    "doc_id-negative": _set("bm25_doc_ids.npy", lambda a: np.array([0, 2, 0, 1, -1], dtype=np.int32)),
    "doc_id-past-the-documents": _set("bm25_doc_ids.npy", lambda a: np.array([0, 2, 0, 1, 3], dtype=np.int32)),
    "tf-zero": _set("bm25_tf.npy", lambda a: np.array([1, 1, 2, 0, 1], dtype=np.int32)),
    "doc_len-negative": _set("bm25_doc_len.npy", lambda a: np.array([3, -2, 1], dtype=np.int32)),
}


@pytest.mark.parametrize("change", INCONSISTENT.values(), ids=INCONSISTENT)
def test_arrays_that_contradict_each_other_are_refused(change):
    vocab, arrays = _parts()
    change(arrays)
    with pytest.raises(LocalIndexError) as info:
        _from(vocab, arrays)
    assert str(info.value) == "BM25 files in ix are inconsistent with each other; rebuild the index"


def test_unsorted_postings_are_refused_but_a_fall_between_terms_is_fine():
    vocab, arrays = _parts()
    arrays["bm25_doc_ids.npy"] = np.array([2, 0, 0, 1, 1], dtype=np.int32)  # term a: docs 2, 0
    with pytest.raises(LocalIndexError) as info:
        _from(vocab, arrays)
    assert str(info.value) == "BM25 postings in ix are not sorted by document within each term; rebuild the index"
    vocab, arrays = _parts()  # doc ids fall from 2 to 0 where term a ends and term b starts: sorted
    assert _from(vocab, arrays).n_docs == 3
    repeated = {**arrays, "bm25_doc_ids.npy": np.array([0, 0, 0, 1, 1], dtype=np.int32)}
    with pytest.raises(LocalIndexError, match="not sorted"):
        _from(vocab, repeated)


def test_an_empty_or_one_posting_index_loads():
    empty = BM25Index.empty()
    again = BM25Index.from_stored(empty.vocab_document(), *empty.arrays().values(), where="ix")
    assert again.n_docs == 0 and again.scores(["a"]).tolist() == []
    one = BM25Index.build([["a"]])
    assert BM25Index.from_stored(one.vocab_document(), *one.arrays().values(), where="ix").n_docs == 1


@pytest.mark.parametrize(("vocab", "problem"), [
    (["a"], "must be an object with exactly 'params' and 'terms'"),
    ({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}}, "must be an object with exactly 'params' and 'terms'"),
    ({"params": [], "terms": []}, "'params' must hold exactly k1, b, epsilon"),
    ({"params": {"k1": 1.5, "b": 0.75}, "terms": []}, "'params' must hold exactly k1, b, epsilon"),
    ({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25, "delta": 1}, "terms": []}, "'params' must hold exactly k1, b, epsilon"),
    ({"params": {"k1": True, "b": 0.75, "epsilon": 0.25}, "terms": []}, "'params' must be finite numbers"),
    ({"params": {"k1": 1.5, "b": "0.75", "epsilon": 0.25}, "terms": []}, "'params' must be finite numbers"),
    ({"params": {"k1": 1.5, "b": 0.75, "epsilon": float("inf")}, "terms": []}, "'params' must be finite numbers"),
    ({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "terms": "abc"}, "'terms' must be a list of strings"),
    ({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "terms": ["a", 1]}, "'terms' must be a list of strings"),
    ({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "terms": ["a", "a"]}, "'terms' repeats a term"),
    ({"params": {"k1": -1, "b": 0.75, "epsilon": 0.25}, "terms": []},
     "BM25 needs k1 >= 0, 0 <= b <= 1, epsilon >= 0; got k1=-1.0, b=0.75, epsilon=0.25"),
])
def test_a_corrupt_vocabulary_is_refused_with_its_problem(vocab, problem):
    empty = BM25Index.empty()
    with pytest.raises(LocalIndexError) as info:
        BM25Index.from_stored(vocab, *empty.arrays().values(), where="ix")
    assert str(info.value) == f"BM25 vocabulary in ix is corrupt: {problem}; rebuild the index"


def test_integer_parameters_are_stored_as_given_and_loaded_as_floats():
    vocab = {"params": {"k1": 2, "b": 1, "epsilon": 0}, "terms": []}
    loaded = BM25Index.from_stored(vocab, *BM25Index.empty().arrays().values(), where="ix")
    assert (loaded.k1, loaded.b, loaded.epsilon) == (2.0, 1.0, 0.0) and type(loaded.k1) is float


@pytest.mark.parametrize("params", [{"k1": -0.1}, {"b": -0.1}, {"b": 1.1}, {"epsilon": -0.1}])
def test_parameters_out_of_range_are_refused(params):
    with pytest.raises(ConfigError, match=r"^BM25 needs k1 >= 0, 0 <= b <= 1, epsilon >= 0; got "):
        BM25Index.build(DOCS, **params)


@pytest.mark.parametrize("params", [{"k1": 0.0}, {"b": 0.0}, {"b": 1.0}, {"epsilon": 0.0}])
def test_parameters_at_their_bounds_are_accepted(params):
    assert BM25Index.build(DOCS, **params).n_docs == 3


def test_save_writes_the_arrays_and_the_vocabulary_and_load_maps_them(tmp_path):
    index = BM25Index.build(DOCS, k1=1.2, b=0.5)
    names = index.save(tmp_path)
    assert names == [name for name, _ in BM25_ARRAYS] + [BM25_VOCAB]
    assert json.loads((tmp_path / BM25_VOCAB).read_text(encoding="utf-8")) == index.vocab_document()
    loaded = BM25Index.load(tmp_path)
    assert isinstance(loaded.doc_ids, np.memmap) and (loaded.k1, loaded.b) == (1.2, 0.5)
    assert loaded.scores(["a", "b"]).tolist() == index.scores(["a", "b"]).tolist()
    (tmp_path / "bm25_tf.npy").unlink()
    with pytest.raises(LocalIndexError) as info:
        BM25Index.load(tmp_path)
    assert str(info.value).startswith(f"BM25 files in {tmp_path} are missing or corrupt (")
    assert str(info.value).endswith("); rebuild the index")
