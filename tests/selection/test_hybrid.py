"""Hybrid (dense + lexical) scoring in ECSE: the maths, the cut, and METEORA parity for dense."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meteora_edge import ConfigError, HashingEncoder, InputError, MeteoraSelector
from meteora_edge.models.analyzer import DEFAULT_ANALYZER, LEGACY_ANALYZER
from meteora_edge.models.bm25 import BM25Index, bm25_tokens
from meteora_edge.selection.stages import cosine_matrix, fuse_scores, leading_block, standardise, zscore_cut

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # the numeric core never warns


def _encoder(vectors):
    return lambda texts: np.array([vectors[t] for t in texts], dtype=np.float32)


def test_standardise_rows_and_constant_rows():
    out = standardise(np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]]))
    assert np.allclose(out[0], [-1.224745, 0.0, 1.224745])
    assert out[1].tolist() == [0.0, 0.0, 0.0]
    assert standardise(np.array([5.0])).tolist() == [0.0]


def test_standardise_works_in_double_precision_and_keeps_the_shape():
    cosines = np.array([0.1, 0.2, 0.7], dtype=np.float32)  # what encoders return
    values = [float(x) for x in cosines]
    mean = sum(values) / 3
    std = (sum((v - mean) ** 2 for v in values) / 3) ** 0.5
    out = standardise(cosines)
    assert out.dtype == np.float64 and out.shape == (3,)
    np.testing.assert_allclose(out, [(v - mean) / std for v in values], rtol=1e-12)
    assert standardise(np.array([[0.5, 1.5]])).tolist() == [[-1.0, 1.0]]  # one row stays a matrix


@pytest.mark.parametrize("value", [0.1, 0.7, 1 / 3, 2.2, 0.0])
@pytest.mark.parametrize("n", [3, 7, 10])
def test_a_constant_row_standardises_to_zeros_despite_rounding(value, n):
    # the mean of n copies of 0.1 is not exactly 0.1, so a plain std > 0 test sees a spread of
    # 1e-17 and turns the row into +1 or -1 everywhere; no chunk stands out of a constant row
    out = standardise(np.array([[value] * n, list(range(n))]))
    assert out[0].tolist() == [0.0] * n
    assert zscore_cut(np.full(n, value), 0.5).tolist() == []


@pytest.mark.parametrize("shape", [(0,), (2, 0)])
def test_standardise_of_nothing_is_nothing_without_warnings(shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert standardise(np.zeros(shape)).shape == shape


def test_fuse_dense_is_the_cosine_unchanged_and_hybrid_adds_standardised_parts():
    dense = np.array([[0.9, 0.1, 0.5]])
    lexical = np.array([[0.0, 6.0, 3.0]])
    assert fuse_scores(dense, lexical, scoring="dense") is not None
    assert np.array_equal(fuse_scores(dense, lexical, scoring="dense"), dense)
    assert np.allclose(fuse_scores(dense, lexical, scoring="lexical"), standardise(lexical))
    hybrid = fuse_scores(dense, lexical, scoring="hybrid", lexical_weight=0.5)
    assert np.allclose(hybrid, standardise(dense) + 0.5 * standardise(lexical))
    with pytest.raises(ValueError, match="scoring must be one of"):
        fuse_scores(dense, lexical, scoring="magic")


def test_fuse_defaults_to_equal_weights_and_works_in_float64():
    dense = np.array([[0.9, 0.1, 0.5]], dtype=np.float32)  # cosines as encoders return them
    lexical = np.array([[0.0, 6.0, 3.0]])
    assert np.array_equal(fuse_scores(dense, lexical, scoring="hybrid"), standardise(dense) + standardise(lexical))
    assert fuse_scores(dense, lexical, scoring="dense").dtype == np.float64


def test_fuse_errors_name_the_choices_and_both_shapes():
    with pytest.raises(ValueError) as info:
        fuse_scores(np.zeros((1, 2)), np.zeros((1, 2)), scoring="magic")
    assert str(info.value) == "scoring must be one of dense, lexical, hybrid, got 'magic'"
    with pytest.raises(ValueError) as info:
        fuse_scores(np.zeros((1, 3)), np.zeros((2, 3)), scoring="hybrid")
    assert str(info.value) == "dense scores have shape (1, 3) but lexical scores (2, 3)"


def _profile(winners: int, n: int = 40, seed: int = 0) -> np.ndarray:
    """``winners`` clear winners near 0.8 over ``n`` - ``winners`` near-misses and noise near 0.3."""
    rng = np.random.default_rng(seed)
    return np.concatenate([0.8 + 0.03 * rng.standard_normal(winners), 0.3 + 0.05 * rng.standard_normal(n - winners)])


@pytest.mark.parametrize("winners", [1, 3, 6])
def test_the_leading_block_keeps_as_many_as_stand_out(winners):
    for seed in range(5):
        scores = _profile(winners, seed=seed)
        kept = leading_block(scores, 0.5)
        assert sorted(kept.tolist()) == list(range(winners)), (seed, kept)
        assert [scores[i] for i in kept] == sorted(scores[kept], reverse=True)  # best first


def test_the_z_score_cut_alone_misses_part_of_a_block_of_eight():
    """Eight winners lift the mean and spread, so z >= 2 keeps only some; the block keeps all eight."""
    scores = _profile(8)
    assert len(zscore_cut(scores, 2.0)) < 8
    assert sorted(leading_block(scores, 0.5).tolist()) == list(range(8))


def test_no_leading_block_without_a_clear_drop_or_enough_candidates():
    assert leading_block(np.linspace(1.0, 0.0, 40), 0.5).tolist() == []  # evenly spread
    assert leading_block(np.full(20, 0.4), 0.5).tolist() == []  # flat
    assert leading_block(_profile(3, n=9), 0.5).tolist() == []  # nothing below the nine compared
    assert leading_block(_profile(3, n=10), 0.5).tolist() != []
    # the drop must be at least min_gap standard deviations wide
    rng = np.random.default_rng(0)
    near = np.concatenate([0.45 + 0.03 * rng.standard_normal(3), 0.3 + 0.05 * rng.standard_normal(37)])
    assert sorted(leading_block(near, 1.0).tolist()) == [0, 1, 2]  # a drop of 1.2 sd
    assert leading_block(near, 2.0).tolist() == []


def test_a_leading_block_stands_out_from_a_majority_below_it():
    """Among ten scores the window is four: eight (or five) alike over the rest are no block, four are."""
    for seed in range(5):
        assert leading_block(_profile(8, n=10, seed=seed), 0.5).tolist() == [], seed
        assert leading_block(_profile(5, n=10, seed=seed), 0.5).tolist() == [], seed
        assert sorted(leading_block(_profile(4, n=10, seed=seed), 0.5).tolist()) == [0, 1, 2, 3], seed
    # from seventeen scores on (nine compared, eight below), the full window of eight is back
    assert sorted(leading_block(_profile(8, n=17), 0.5).tolist()) == list(range(8))
    assert leading_block(_profile(8, n=16), 0.5).tolist() == []


def test_the_selector_adds_the_leading_block_to_the_z_score_cut():
    texts = [f"chunk {i}" for i in range(20)]
    rng = np.random.default_rng(1)
    vectors = {t: rng.standard_normal(8) for t in texts}
    vectors["rationale"] = vectors["chunk 0"] + vectors["chunk 1"] + vectors["chunk 2"]
    for t in ("chunk 0", "chunk 1", "chunk 2"):
        vectors[t] = vectors["rationale"] + 0.2 * rng.standard_normal(8)
    off = MeteoraSelector(_encoder(vectors), scoring="hybrid", expansion_window=0, pooled_z=2.5).select(texts, ["rationale"])
    on = MeteoraSelector(_encoder(vectors), scoring="hybrid", expansion_window=0, pooled_z=2.5,
                         pooled_gap=0.5).select(texts, ["rationale"])
    assert len(off.selected_indices) < 3
    assert on.selected_indices == [0, 1, 2]
    with pytest.raises(ConfigError, match="pooled_gap must be >= 0"):
        MeteoraSelector(_encoder(vectors), pooled_gap=-1)


def test_zscore_cut_keeps_only_standouts_best_first():
    assert zscore_cut(np.array([0.1, 0.2, 0.15, 0.9, 0.12]), 1.5).tolist() == [3]
    assert zscore_cut(np.array([0.5, 0.5, 0.5]), 1.0).tolist() == []  # nothing stands out
    assert zscore_cut(np.array([1.0, 0.0, 1.0, 0.0]), 0.5).tolist() == [0, 2]
    assert zscore_cut(np.array([0.0, 0.0, 0.0, 0.0, 5.0, 9.0]), 0.5).tolist() == [5, 4]  # best first


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=30), st.floats(0.0, 3.0))
def test_zscore_cut_is_exactly_the_scores_at_or_above_the_threshold(scores, z):
    values = np.array(scores)
    z_scores = standardise(values)
    kept = zscore_cut(values, z).tolist()
    assert set(kept) == {i for i, s in enumerate(z_scores) if s >= z}
    assert kept == sorted(kept, key=lambda i: (-z_scores[i], i))  # best first, ties by position


def test_dense_scoring_is_meteora_exactly():
    """scoring='dense' must give what METEORA's ECSE gives (the default selector)."""
    rng = np.random.default_rng(7)
    chunks = [f"c{i}" for i in range(12)]
    table = {c: rng.normal(size=8).tolist() for c in chunks} | {"r1": rng.normal(size=8).tolist(), "r2": rng.normal(size=8).tolist()}
    plain = MeteoraSelector(_encoder(table)).select(chunks, ["r1", "r2"])
    dense = MeteoraSelector(_encoder(table), scoring="dense", pooled_cut="elbow").select(chunks, ["r1", "r2"])
    assert plain.to_dict() == dense.to_dict()
    similarity = cosine_matrix(np.array([table["r1"], table["r2"]]), np.array([table[c] for c in chunks]))
    assert plain.pairing_indices == sorted(set(np.argmax(similarity, axis=1).tolist()))


def test_hybrid_pairing_follows_names_that_cosine_misses():
    # the dense vectors point rationale 1 at chunk 0, but only chunk 2 shares its rare words
    chunks = ["alpha beta", "gamma delta", "Shirley Temple ambassador Ghana"]
    table = {"alpha beta": [1, 0, 0], "gamma delta": [0.6, 0.8, 0], "Shirley Temple ambassador Ghana": [0.9, 0, 0.43],
             "Shirley Temple Ghana": [1, 0, 0]}
    dense = MeteoraSelector(_encoder(table), expansion_window=0).select(chunks, ["Shirley Temple Ghana"])
    hybrid = MeteoraSelector(_encoder(table), expansion_window=0, scoring="hybrid").select(chunks, ["Shirley Temple Ghana"])
    assert dense.pairing_indices == [0]
    assert hybrid.pairing_indices == [2]
    details = hybrid.to_dict()["details"]
    assert details["scoring"] == "hybrid" and details["pooled_cut"] == "zscore"
    bm25 = BM25Index.build(bm25_tokens(c) for c in chunks).scores(bm25_tokens("Shirley Temple Ghana"))
    assert np.allclose(details["lexical_scores"], bm25, atol=1e-6)  # both component scores are recorded
    assert len(details["dense_scores"]) == 3


def test_lexical_scoring_ignores_the_encoder_for_pairing():
    chunks = ["the cat sat", "a dog barked loudly", "cats and dogs"]
    result = MeteoraSelector(HashingEncoder(), expansion_window=0, scoring="lexical").select(chunks, ["dog barked"])
    assert result.pairing_indices == [1]


@pytest.mark.parametrize("kwargs", [
    {"scoring": "semantic"}, {"pooled_cut": "knee"}, {"lexical_weight": -1}, {"lexical_weight": float("nan")},
    {"pooled_z": "2"},
])
def test_bad_hybrid_settings_are_refused(kwargs):
    with pytest.raises(ConfigError):
        MeteoraSelector(HashingEncoder(), **kwargs)


# -- a BM25 index handed in (the pipeline builds one per run) ---------------------------------------

HOP_CHUNKS = ["Shirley Temple was ambassador to Ghana.", "Ghana lies in West Africa.",
              "Fees are payable every month.", "Temple starred in Bright Eyes."]


def test_a_handed_in_bm25_index_gives_what_the_selector_builds_and_is_not_rebuilt(monkeypatch):
    selector = MeteoraSelector(HashingEncoder(), expansion_window=0, scoring="hybrid")
    built = selector.select(HOP_CHUNKS, ["Shirley Temple Ghana", "West Africa"]).to_dict()
    plan = selector.plan_auto(HOP_CHUNKS, "Where was Shirley Temple ambassador?")
    index = BM25Index.from_texts(HOP_CHUNKS, analyzer=selector.analyzer)
    monkeypatch.setattr(BM25Index, "from_texts", None)  # building another would fail
    handed = selector.select(HOP_CHUNKS, ["Shirley Temple Ghana", "West Africa"], lexical_index=index).to_dict()
    assert handed == built
    assert selector.plan_auto(HOP_CHUNKS, "Where was Shirley Temple ambassador?", lexical_index=index) == plan


def test_select_auto_builds_one_bm25_index_for_its_plan_and_its_selection(monkeypatch):
    builds = []
    original = BM25Index.from_texts

    def counting(texts, **kwargs):
        builds.append(list(texts))
        return original(builds[-1], **kwargs)

    monkeypatch.setattr(BM25Index, "from_texts", counting)
    result = MeteoraSelector(HashingEncoder(), scoring="hybrid").select_auto(HOP_CHUNKS, "Where was Shirley Temple ambassador?")
    assert builds == [HOP_CHUNKS] and result.selected_indices


@pytest.mark.parametrize("index, message", [
    (BM25Index.from_texts(HOP_CHUNKS[:3]), "lexical_index holds 3 documents but there are 4 chunks; build it over the same chunks"),
    (BM25Index.from_texts(HOP_CHUNKS, analyzer=LEGACY_ANALYZER),
     f"lexical_index was built with the analyzer {LEGACY_ANALYZER.name}:{LEGACY_ANALYZER.version} but the selector "
     f"uses {DEFAULT_ANALYZER.name}:{DEFAULT_ANALYZER.version}; build it with the selector's"),
    ({"not": "an index"}, "lexical_index must be a BM25Index or None, got dict"),
])
def test_a_bm25_index_over_other_chunks_or_terms_is_refused(index, message):
    selector = MeteoraSelector(HashingEncoder(), scoring="lexical")
    with pytest.raises(InputError) as info:
        selector.select(HOP_CHUNKS, ["Ghana"], lexical_index=index)
    assert str(info.value) == message
