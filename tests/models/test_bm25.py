import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from meteora_edge.models.bm25 import BM25Index, bm25_tokens
from meteora_edge.errors import LocalIndexError


def _corpus(seed: int, n: int):
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(120)]
    return [[rng.choice(words) for _ in range(rng.randint(1, 25))] for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_match_rank_bm25_including_negative_idf_floor(seed):
    docs = _corpus(seed, 300) + [["t1"]] * 200  # t1 in most documents -> negative idf
    reference = BM25Okapi(docs)
    ours = BM25Index.build(docs)
    for query in (["t1"], ["t2", "t3", "t2"], ["t7", "nothing"], []):
        np.testing.assert_allclose(ours.scores(query), reference.get_scores(query), rtol=1e-5, atol=1e-5)


def test_extend_equals_building_at_once():
    docs = _corpus(5, 80)
    whole = BM25Index.build(docs)
    grown = BM25Index.build(docs[:30]).extend(docs[30:])
    for query in (["t4", "t9"], ["t100"]):
        np.testing.assert_allclose(grown.scores(query), whole.scores(query), rtol=1e-6)


def test_search_returns_positive_hits_best_first_and_respects_within():
    index = BM25Index.build([bm25_tokens(t) for t in ["red apple", "green apple pie", "blue sky", "apple apple"]])
    ids, scores = index.search("apple", 10)
    assert set(ids.tolist()) == {0, 1, 3} and list(scores) == sorted(scores, reverse=True)
    assert index.search("zebra", 5)[0].tolist() == []
    assert index.search("apple", 10, within=[1, 2])[0].tolist() == [1]


def test_save_load_round_trip_and_corruption(tmp_path):
    index = BM25Index.build(_corpus(3, 50))
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path)
    np.testing.assert_allclose(loaded.scores(["t5", "t6"]), index.scores(["t5", "t6"]))
    np.save(tmp_path / "bm25_doc_ids.npy", np.zeros(3, dtype=np.int32))
    with pytest.raises(LocalIndexError, match="inconsistent"):
        BM25Index.load(tmp_path)
    (tmp_path / "bm25_vocab.json").write_text("{broken")
    with pytest.raises(LocalIndexError, match="corrupt"):
        BM25Index.load(tmp_path)


def test_tokens_are_unicode_words():
    assert bm25_tokens("Café-Crème, naïve 42!") == ["café", "crème", "naïve", "42"]
