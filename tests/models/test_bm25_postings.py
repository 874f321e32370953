"""Stored BM25 postings at the term boundaries: terms with no postings at the start or end of the
vocabulary load (and score) correctly, yet a fall inside the last term's postings is still
caught; arrays of a non-integer type are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge.errors import LocalIndexError
from meteora_edge.models.bm25 import BM25Index

PARAMS = {"k1": 1.5, "b": 0.75, "epsilon": 0.25}


def _stored(terms, term_ptr, doc_ids, doc_len):
    """An index from hand-written stored parts (every term frequency 1)."""
    return BM25Index.from_stored(
        {"params": PARAMS, "terms": terms},
        np.array(term_ptr, dtype=np.int64),
        np.array(doc_ids, dtype=np.int32),
        np.ones(len(doc_ids), dtype=np.int32),
        np.array(doc_len, dtype=np.int32),
        where="ix",
    )


def test_a_term_without_postings_at_either_end_of_the_vocabulary_loads_and_scores():
    """Term "a" (first) and term "z" (last) occur in no document: their postings are empty
    ranges at offset 0 and at the very end; both are legal and score nothing, and the terms
    between them score their own documents, by either scoring path."""
    index = _stored(["a", "b", "c", "z"], [0, 0, 2, 3, 3], [0, 1, 0], [2, 1, 1])
    assert index.scores(["a"]).tolist() == [0.0, 0.0, 0.0] and index.scores(["z"]).tolist() == [0.0, 0.0, 0.0]
    c = index.scores(["c"])
    assert c[0] > 0 and c[1] == c[2] == 0.0
    for term in ("a", "b", "c", "z"):
        assert index.scores_for([term], [2, 1, 0]).tolist() == index.scores([term])[[2, 1, 0]].tolist()


@pytest.mark.parametrize("terms,term_ptr,doc_ids", [
    (["a", "b", "c"], [0, 0, 2, 4], [0, 1, 1, 0]),   # "a" empty; "c" lists doc 1 before doc 0
    (["b", "c", "z"], [0, 2, 4, 4], [0, 1, 1, 0]),   # "z" empty at the end; "c" falls
    (["b", "c"], [0, 1, 3], [0, 1, 1]),             # "c" lists doc 1 twice
])
def test_a_fall_or_repeat_in_the_last_postings_is_refused_even_next_to_an_empty_term(terms, term_ptr, doc_ids):
    """Only the step from one term's postings into the next may fall; the last pair of the
    last non-empty term is checked like any other."""
    with pytest.raises(LocalIndexError) as info:
        _stored(terms, term_ptr, doc_ids, [1, 1])
    assert str(info.value) == "BM25 postings in ix are not sorted by document within each term; rebuild the index"


@pytest.mark.parametrize("dtype", ["float64", "uint64", "bool"])
@pytest.mark.parametrize("name", ["bm25_term_ptr.npy", "bm25_doc_ids.npy", "bm25_tf.npy", "bm25_doc_len.npy"])
def test_a_stored_array_not_of_signed_integers_is_refused_by_name(tmp_path, name, dtype):
    """Offsets, document ids and counts are signed integers: a float, unsigned or boolean array (a
    file rewritten by another tool) would crash a query or score with fractional lengths, so
    loading refuses it in one line."""
    BM25Index.build([["a", "b"], ["b"]]).save(tmp_path)
    np.save(tmp_path / name, np.load(tmp_path / name).astype(dtype))
    with pytest.raises(LocalIndexError) as info:
        BM25Index.load(tmp_path)
    assert str(info.value) == (f"BM25 array {name} in {tmp_path} holds {dtype}, expected signed integers; "
                               "rebuild the index")


def test_signed_integer_arrays_of_any_width_load_like_the_stored_ones():
    index = BM25Index.build([["a", "b"], ["b", "c"], ["c"]])
    arrays = [a.astype(np.int16) for a in index.arrays().values()]
    loaded = BM25Index.from_stored(index.vocab_document(), *arrays, where="ix")
    for term in ("a", "b", "c"):
        assert loaded.scores([term]).tolist() == index.scores([term]).tolist()


def test_documents_with_gives_each_holder_once_and_cannot_change_the_index():
    index = BM25Index.from_texts(["a cat", "a dog", "cat and cat"])
    held = index.documents_with("cat")
    assert sorted(held.tolist()) == [0, 2] and index.documents_with("bird").tolist() == []
    with pytest.raises(ValueError):
        held[0] = 1
    assert sorted(index.documents_with("cat").tolist()) == [0, 2]
