"""LocalIndex.search: the query's checks (dimension, dtype) and which path answers — every vector
or the ANN structure — for each value of ``exact``, at the EXACT_BELOW boundary."""

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import InputError
from meteora_edge.index.ann_index import EXACT_BELOW, AnnConfig
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder(n_features=8)  # small vectors keep a 20 000-chunk index quick to build
K = 1000  # more than one IVF list holds, so a one-list probe cannot fill it


def _big_document() -> SourceDocument:
    """One document that chunks (3 words each, no overlap) into exactly EXACT_BELOW chunks."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in rng.integers(0, 400, size=3 * EXACT_BELOW)]
    return SourceDocument("big", " ".join(words), {})


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """The same EXACT_BELOW chunks twice: without an ANN, and with an IVF that probes a single list."""
    pytest.importorskip("faiss")
    root = tmp_path_factory.mktemp("large")
    doc = _big_document()
    plain = LocalIndex.build(root / "plain", [doc], ENC, chunk_size=3, overlap=0)
    ann = LocalIndex.build(root / "ann", [doc], ENC, chunk_size=3, overlap=0, ann=AnnConfig(kind="ivf", probe=1))
    assert len(plain) == len(ann) == EXACT_BELOW
    return plain, ann


def _query(index):
    return np.asarray(index.vectors_for([123])[0])


def test_exact_true_reads_every_vector_even_with_an_ann(large):
    """exact=True answers like an index without ANN: all K best chunks, the same ids and scores."""
    plain, ann = large
    ids, scores = ann.search(_query(ann), K, exact=True)
    want_ids, want_scores = plain.search(_query(plain), K)
    assert len(ids) == K
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)


def test_exact_false_uses_the_ann_candidates_only(large):
    """exact=False asks the ANN structure: one probed IVF list cannot hold K chunks, so fewer come back,
    all of them with exact cosines, best first, and the query's own chunk among them."""
    _, ann = large
    q = _query(ann)
    ids, scores = ann.search(q, K, exact=False)
    assert 0 < len(ids) < K and 123 in ids.tolist()
    np.testing.assert_allclose(scores, np.asarray(ann.vectors[ids]) @ (q / np.linalg.norm(q)), rtol=1e-5)
    assert list(scores) == sorted(scores, reverse=True)


def test_default_uses_the_ann_from_exactly_exact_below_chunks(large):
    """exact=None: an index of EXACT_BELOW chunks (the threshold itself) with an ANN goes through the ANN."""
    _, ann = large
    q = _query(ann)
    ids, scores = ann.search(q, K)
    ann_ids, ann_scores = ann.search(q, K, exact=False)
    np.testing.assert_array_equal(ids, ann_ids)
    np.testing.assert_array_equal(scores, ann_scores)
    assert len(ids) < K


def test_default_on_a_large_index_without_ann_reads_every_vector(large):
    """exact=None on an index of EXACT_BELOW chunks without ANN: a full exact search (no ANN to use)."""
    plain, _ = large
    q = _query(plain)
    ids, scores = plain.search(q, K)
    assert len(ids) == K and scores[0] == pytest.approx(1.0)
    np.testing.assert_allclose(scores, np.sort(np.asarray(plain.vectors) @ (q / np.linalg.norm(q)))[::-1][:K],
                               rtol=1e-6)


def test_exact_false_without_ann_is_refused(large):
    plain, _ = large
    with pytest.raises(InputError) as info:
        plain.search(_query(plain), 3, exact=False)
    assert str(info.value) == f"index {plain.root} has no ANN structure; rebuild it with 'index build --ann ivf'"


# -- the query vector ---------------------------------------------------------------------------------

DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
]


@pytest.fixture
def small(tmp_path):
    return LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=5, overlap=0)


@pytest.mark.parametrize("dimension", [5, 383, 385])
def test_a_query_of_another_dimension_is_refused_naming_both(small, dimension):
    with pytest.raises(InputError) as info:
        small.search(np.ones(dimension, dtype=np.float32), 2)
    assert str(info.value) == f"query vector has dimension {dimension}, the index 384"


def test_a_query_in_float64_or_as_a_list_scores_in_float32_like_the_stored_vectors(small):
    """Whatever the query's type, it is scored as float32 against the float32 vectors: the same ids and
    bit-identical float32 scores for a float32 array, a float64 array and a plain list."""
    q32 = HashingEncoder().encode(["terminate the agreement"])[0]
    ids, scores = small.search(q32, 3)
    assert scores.dtype == np.float32
    for query in (q32.astype(np.float64), [float(x) for x in q32]):
        other_ids, other_scores = small.search(query, 3)
        assert other_scores.dtype == np.float32
        np.testing.assert_array_equal(other_ids, ids)
        np.testing.assert_array_equal(other_scores, scores)


def test_vectors_for_gives_float32_rows_in_the_order_asked(small):
    rows = small.vectors_for([2, 0, 2])
    assert rows.dtype == np.float32 and rows.shape == (3, 384)
    np.testing.assert_array_equal(rows[0], rows[2])
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(rows[1], np.asarray(small.vectors[0]))
