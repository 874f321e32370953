import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meteora_edge import Chunk, ConfigError, HashingEncoder, InputError, MeteoraSelector
from meteora_edge.selection.stages import cosine_matrix, expand_positions, pooled_scores, top_k_indices


def _encoder(vectors: dict[str, list[float]]):
    return lambda texts: np.array([vectors[t] for t in texts], dtype=np.float32)


def test_selection_follows_pairing_pooling_and_expansion_exactly():
    vectors = {
        "c0": [1, 0, 0], "c1": [0.9, 0.1, 0], "c2": [0, 1, 0], "c3": [0, 0.2, 1], "c4": [0, 0, 1],
        "r1": [1, 0, 0], "r2": [0, 0, 1],
    }
    chunks = ["c0", "c1", "c2", "c3", "c4"]
    result = MeteoraSelector(_encoder(vectors), expansion_window=1).select(chunks, ["r1", "r2"])
    d = result.to_dict()["details"]
    assert d["pairing_indices"] == [0, 4]
    assert d["rationale_matches"] == [
        {"rationale_index": 1, "chunk_index": 0, "score": 1.0},
        {"rationale_index": 2, "chunk_index": 4, "score": 1.0},
    ]
    # pooled mean (0.5, 0, 0.5): scores c0 .707, c1 .703, c2 0, c3 .693, c4 .707
    assert d["pooled_scores"][2] == 0.0
    assert d["elbow_index"] == 3  # the drop to c2 is the outlier
    assert d["pooled_indices"] == [0, 1, 3, 4]
    assert d["expansion_indices"] == [2]
    assert result.selected_indices == [0, 1, 2, 3, 4]
    assert d["rationale_contributions"] == {"0": [1], "4": [2]}


def test_stage_toggles_and_window_zero():
    vectors = {"a": [1, 0], "b": [0.8, 0.6], "c": [0, 1], "d": [0.1, 1], "r": [1, 0]}
    enc = _encoder(vectors)
    only_pairing = MeteoraSelector(enc, use_pooling=False, expansion_window=0).select(list("abcd"), ["r"])
    assert only_pairing.selected_indices == [0]
    with_expansion = MeteoraSelector(enc, use_pooling=False, expansion_window=2).select(list("abcd"), ["r"])
    assert with_expansion.selected_indices == [0, 1, 2]
    no_exp = MeteoraSelector(enc, use_pooling=False, use_expansion=False, expansion_window=2).select(list("abcd"), ["r"])
    assert no_exp.selected_indices == [0]
    with pytest.raises(ConfigError):
        MeteoraSelector(enc, use_pairing=False, use_pooling=False)


def test_several_rationales_can_converge_on_one_chunk():
    vectors = {"x": [1, 0], "y": [0, 1], "r1": [1, 0.1], "r2": [1, -0.1]}
    res = MeteoraSelector(_encoder(vectors), expansion_window=0).select(["x", "y"], ["r1", "r2"])
    assert res.pairing_indices == [0]
    assert res.rationale_contributions == {0: [1, 2]}


def test_caller_objects_are_returned_untouched():
    docs = [{"text": "fees are due monthly", "id": 1}, Chunk("either party may terminate", 1), "governing law"]
    before = copy.deepcopy(docs)
    res = MeteoraSelector(HashingEncoder(), expansion_window=0).select(docs, ["terminate"])
    assert docs == before
    assert all(any(obj is d for d in docs) for obj in res.selected_chunks)
    assert res.selected_chunks[res.selected_indices.index(1)] is docs[1]


@pytest.mark.parametrize(
    "chunks, rationales, error",
    [([], ["x"], "no chunks"), (["a"], [], "no rationale"), (["a", ""], ["x"], "empty text"),
     ([{"body": "x"}], ["x"], "without a text"), ("abc", ["x"], "list of documents"), ([3], ["x"], "no text")],
)
def test_bad_inputs_raise_input_errors(chunks, rationales, error):
    with pytest.raises(InputError, match=error):
        MeteoraSelector(HashingEncoder()).select(chunks, rationales)


def test_negative_window_is_refused():
    with pytest.raises(ConfigError, match="expansion_window"):
        MeteoraSelector(HashingEncoder(), expansion_window=-1)


vector = st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=4, max_size=4)


@settings(max_examples=150, deadline=None)
@given(
    chunk_vecs=st.lists(vector, min_size=1, max_size=25),
    rationale_vecs=st.lists(vector, min_size=1, max_size=5),
    window=st.integers(0, 3),
)
def test_selection_invariants(chunk_vecs, rationale_vecs, window):
    table = {f"c{i}": v for i, v in enumerate(chunk_vecs)} | {f"r{i}": v for i, v in enumerate(rationale_vecs)}
    chunks = [f"c{i}" for i in range(len(chunk_vecs))]
    rationales = [f"r{i}" for i in range(len(rationale_vecs))]
    selector = MeteoraSelector(_encoder(table), expansion_window=window)
    res = selector.select(chunks, rationales)
    selected = set(res.selected_indices)
    assert res.selected_indices == sorted(selected)
    assert set(res.pairing_indices) <= selected
    assert set(res.pooled_indices) <= selected
    base = set(res.pairing_indices) | set(res.pooled_indices)
    assert base, "pairing always contributes at least one chunk"
    for i in selected:
        assert min(abs(i - b) for b in base) <= window
    assert selected == base | set(res.expansion_indices)
    assert len(res.pairing_indices) <= len(rationales)
    assert res.elbow_index is not None and len(res.pooled_indices) == res.elbow_index + 1
    again = selector.select(list(chunks), list(rationales))
    assert again.to_dict() == res.to_dict()


def test_cosine_matrix_handles_zero_rows():
    sims = cosine_matrix(np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([[3.0, 4.0]]))
    np.testing.assert_allclose(sims, [[0.0], [1.0]])


def _plain_cosine(a, b):
    a, b = [float(x) for x in a], [float(x) for x in b]
    return sum(x * y for x, y in zip(a, b)) / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def test_cosines_and_pooled_scores_are_double_precision_from_float32_vectors():
    rng = np.random.default_rng(5)
    rationales = rng.normal(size=(3, 16)).astype(np.float32)
    chunks = rng.normal(size=(4, 16)).astype(np.float32)
    expected = [[_plain_cosine(r, c) for c in chunks] for r in rationales]
    np.testing.assert_allclose(cosine_matrix(rationales, chunks), expected, rtol=1e-12)
    units = [[float(x) / sum(float(y) ** 2 for y in r) ** 0.5 for x in r] for r in rationales]
    mean = [sum(column) / 3 for column in zip(*units)]  # the mean of unit rows, not re-normalised
    pooled = [sum(m * float(x) for m, x in zip(mean, c)) / sum(float(x) ** 2 for x in c) ** 0.5 for c in chunks]
    np.testing.assert_allclose(pooled_scores(rationales, chunks), pooled, rtol=1e-12)


def test_expand_positions_clips_to_bounds():
    assert expand_positions([0, 9], 10, 2).tolist() == [0, 1, 2, 7, 8, 9]
    assert expand_positions([4, 5], 10, 0).tolist() == [4, 5]
    assert expand_positions([], 5, 3).tolist() == []


def test_top_k_breaks_ties_by_index():
    assert top_k_indices(np.array([0.5, 0.9, 0.5, 0.5, 0.1]), 3).tolist() == [1, 0, 2]
    assert top_k_indices(np.array([0.2]), 5).tolist() == [0]
    assert top_k_indices(np.array([0.2]), 0).tolist() == []
