"""InMemoryIndex: kNN and BM25 over chunks in memory, optionally limited to subsets."""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge import InMemoryIndex
from meteora_edge.errors import InputError

TEXTS = ["apples and pears", "pears only", "plums, plums and apples", "nothing here"]
VECTORS = [[1.0, 0.0], [0.0, 2.0], [3.0, 4.0], [-1.0, 0.0]]  # unit: (1,0) (0,1) (.6,.8) (-1,0)


class RefusingEncoder:
    identity = "refusing"

    def encode(self, texts):
        raise AssertionError(f"encoded {texts!r} although vectors were given")


def test_given_vectors_skip_the_encoder_and_are_kept_as_float32_unit_rows():
    index = InMemoryIndex(TEXTS, RefusingEncoder(), vectors=np.array(VECTORS, dtype=np.float64))
    assert index.vectors.dtype == np.float32
    np.testing.assert_allclose(index.vectors, [[1, 0], [0, 1], [0.6, 0.8], [-1, 0]], atol=1e-7)
    assert index.encoder_id == "refusing" and len(index) == 4


def test_vectors_for_a_different_number_of_documents_are_refused_with_both_counts():
    with pytest.raises(InputError) as info:
        InMemoryIndex(TEXTS, RefusingEncoder(), vectors=np.zeros((3, 5)))
    assert str(info.value) == "3 vectors for 4 documents"


def test_search_scores_are_cosines_best_first_whatever_the_query_length():
    index = InMemoryIndex(TEXTS, RefusingEncoder(), vectors=VECTORS)
    ids, scores = index.search(np.array([[10.0, 0.0]]), 3)  # a (1, d) row, not unit length
    assert ids.tolist() == [0, 2, 1]
    np.testing.assert_allclose(scores, [1.0, 0.6, 0.0], atol=1e-7)
    assert scores.dtype == np.float32  # computed in float32, as LocalIndex does, whatever the query's dtype


@pytest.mark.parametrize(("scope", "k", "expected"), [
    ([3, 1], 4, [1, 3]),      # only scoped positions, best first (cos 0 before cos -1)
    ([2, 0], 1, [0]),
    ([], 3, []),
    ([0, 1, 3], 2, [0, 1]),
    ([3, 1, 3, 1], 4, [1, 3]),  # a repeated position counts once
])
def test_knn_scope_limits_what_search_returns(scope, k, expected):
    index = InMemoryIndex(TEXTS, RefusingEncoder(), vectors=VECTORS, knn_scope=scope)
    assert index.search(np.array([0.0, 1.0]), 2)[0].tolist() == [x for x in [1, 2, 0, 3] if x in scope][:2]
    ids, scores = index.search(np.array([1.0, 0.0]), k)
    assert ids.tolist() == expected
    assert np.all(np.isfinite(scores)) and len(scores) == len(expected)
    np.testing.assert_allclose(scores, [np.asarray(VECTORS[i]) @ [1, 0] / np.linalg.norm(VECTORS[i]) for i in expected])


def test_bm25_scope_limits_bm25_search_and_records_report_labels():
    index = InMemoryIndex(TEXTS, RefusingEncoder(), vectors=VECTORS, labels=["a", "b", "c", "d"], bm25_scope=[1, 3])
    ids, scores = index.bm25_search("plums, nothing", 4)  # plums: chunk 2, nothing: chunk 3; the scope keeps 3
    assert ids.tolist() == [3] and scores[0] > 0
    unscoped = InMemoryIndex(TEXTS, RefusingEncoder(), vectors=VECTORS)
    assert unscoped.bm25_search("plums, nothing", 4)[0].tolist() == [3, 2]  # the one-term chunk first
    assert index.records([2, 0]) == [
        {"id": "c", "text": TEXTS[2], "document": TEXTS[2]},
        {"id": "a", "text": TEXTS[0], "document": TEXTS[0]},
    ]
