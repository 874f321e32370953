"""The ANN structure on its own (ann_index): how many candidates a query asks for, that every id
(0 included) can be one, what ``probe`` means for HNSW, the seeded training sample, and the
missing-extra error."""

import sys

import numpy as np
import pytest

from meteora_edge.errors import MissingExtraError
from meteora_edge.index.ann_index import AnnConfig, AnnIndex, ann_entry, build_ann, require_faiss

faiss = pytest.importorskip("faiss")


def _unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _structure(vectors: np.ndarray, entry: dict) -> AnnIndex:
    data = build_ann(vectors, entry)
    return AnnIndex(data, entry, count=len(vectors), dimension=vectors.shape[1], where="ann.faiss")


@pytest.fixture(scope="module")
def ivf_all_lists():
    """400 vectors in an IVF whose probe covers every list, so a query sees every vector."""
    vectors = _unit_rows(400, 16, seed=1)
    entry = ann_entry(AnnConfig(kind="ivf", probe=1_000), len(vectors))
    return vectors, _structure(vectors, entry)


@pytest.mark.parametrize(("k", "wanted"), [(1, 64), (16, 64), (17, 68), (20, 80), (99, 396), (100, 400), (500, 400)])
def test_a_query_asks_for_max_4k_64_candidates_capped_at_the_size(ivf_all_lists, k, wanted):
    vectors, ann = ivf_all_lists
    ids = ann.candidates(vectors[7], k)
    assert len(ids) == wanted and ids.dtype == np.int64
    assert ids.tolist() == sorted(set(ids.tolist()))  # sorted, no repeats


def test_every_id_can_be_a_candidate_including_0(ivf_all_lists):
    vectors, ann = ivf_all_lists
    assert ann.candidates(vectors[7], 100).tolist() == list(range(400))
    assert 0 in ann.candidates(vectors[0], 1).tolist()  # the query's own vector, id 0


def test_candidates_are_the_nearest_by_inner_product(ivf_all_lists):
    """Scanning every list, the 64 candidates hold the exact 10 nearest vectors (8-bit codes only blur the tail)."""
    vectors, ann = ivf_all_lists
    for q in _unit_rows(20, 16, seed=2):
        nearest = np.argsort(-(vectors @ q))[:10]
        assert set(nearest.tolist()) <= set(ann.candidates(q, 1).tolist())


def test_an_hnsw_probe_at_least_the_size_searches_exhaustively():
    """HNSW's probe is its efSearch: with probe >= the number of vectors the graph search visits them all,
    so each query's exact 10 nearest vectors are among its 64 candidates (a default efSearch misses some
    on 256-dimensional random vectors)."""
    vectors = _unit_rows(500, 256, seed=0)
    entry = ann_entry(AnnConfig(kind="hnsw", probe=len(vectors)), len(vectors))
    ann = _structure(vectors, entry)
    missed = 0
    for q in _unit_rows(200, 256, seed=5):
        nearest = np.argsort(-(vectors @ q))[:10]
        missed += len(set(nearest.tolist()) - set(ann.candidates(q, 1).tolist()))
    assert missed == 0


# -- building: the training sample ------------------------------------------------------------------

ONE_LIST = {"kind": "ivf", "factory": "IVF1,SQ8", "probe": 1}  # trains on a sample of 1 * 64 vectors


def test_building_twice_gives_the_same_bytes_when_training_samples():
    """More vectors than the training sample (64 for one list): the sample is seeded, so the structure is
    the same byte for byte on every build."""
    vectors = _unit_rows(200, 8, seed=3)
    assert build_ann(vectors, ONE_LIST) == build_ann(vectors, ONE_LIST)


def test_fewer_vectors_than_the_sample_train_on_every_vector_once():
    """40 vectors, a sample of 64: k-means trains on each vector once, so one list's centroid points
    along their mean (k-means for inner product normalises its centroids)."""
    vectors = _unit_rows(40, 8, seed=4)
    index = faiss.deserialize_index(np.frombuffer(build_ann(vectors, ONE_LIST), dtype=np.uint8))
    centroid = faiss.extract_index_ivf(index).quantizer.reconstruct(0)
    mean = vectors.mean(axis=0)
    np.testing.assert_allclose(centroid / np.linalg.norm(centroid), mean / np.linalg.norm(mean), atol=1e-5)
    assert index.ntotal == 40


# -- without faiss ------------------------------------------------------------------------------------

def test_without_faiss_the_error_names_the_package_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # what an environment without faiss-cpu looks like
    with pytest.raises(MissingExtraError) as info:
        require_faiss()
    assert str(info.value) == "'faiss-cpu' is not installed; install it with: pip install \"meteora-edge[ann]\""
    assert (info.value.module, info.value.extra) == ("faiss-cpu", "ann")
