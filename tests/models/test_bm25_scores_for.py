"""BM25Index.scores_for equals scores()[docs] exactly, and unsorted postings are refused on load."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meteora_edge.errors import LocalIndexError
from meteora_edge.models.bm25 import BM25Index

WORDS = st.sampled_from(["a", "b", "c", "d", "e", "f", "g"])


@settings(max_examples=200, deadline=None)
@given(docs=st.lists(st.lists(WORDS, max_size=8), min_size=1, max_size=30),
       query=st.lists(st.sampled_from(["a", "b", "c", "z", "g"]), max_size=6), data=st.data())
def test_scores_for_equals_the_dense_scores(docs, query, data):
    index = BM25Index.build(docs)
    wanted = data.draw(st.lists(st.integers(0, len(docs) - 1), max_size=40))
    np.testing.assert_array_equal(index.scores_for(query, wanted), index.scores(query)[wanted])
    extended = index.extend([["a", "c", "c"], ["g"]])
    every = list(range(len(docs) + 2))[::-1]
    np.testing.assert_array_equal(extended.scores_for(query, every), extended.scores(query)[every])


def test_postings_out_of_order_are_refused():
    index = BM25Index.build([["a", "b"], ["a"], ["a", "b"]])
    arrays = index.arrays()
    doc_ids = arrays["bm25_doc_ids.npy"].copy()
    doc_ids[[0, 1]] = doc_ids[[1, 0]]  # term "a": documents 1, 0, 2
    with pytest.raises(LocalIndexError, match="not sorted"):
        BM25Index.from_stored(index.vocab_document(), arrays["bm25_term_ptr.npy"], doc_ids, arrays["bm25_tf.npy"],
                              arrays["bm25_doc_len.npy"], where="x")
    BM25Index.from_stored(index.vocab_document(), *arrays.values(), where="x")  # the original loads
