"""ECSE's result in detail: what each stage records, the scores it reports, and the rule-written plan."""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge import ConfigError, HashingEncoder, InputError, MeteoraSelector
from meteora_edge.models.bm25 import BM25Index, bm25_tokens
from meteora_edge.selection.stages import pooled_scores, standardise


class Table:
    """Embeds each text from a table and records what it was asked to embed."""

    identity = "table:test"

    def __init__(self, table):
        self.table = {k: np.asarray(v, dtype=np.float64) for k, v in table.items()}
        self.asked: list[str] = []

    def encode(self, texts):
        self.asked += texts
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


RNG = np.random.default_rng(11)
CHUNKS = [f"chunk {i} about {w}" for i, w in enumerate("fees notice law term cats dogs rent data".split())]
RATIONALES = ["rationale one fees", "rationale two notice law"]
TABLE = {t: RNG.normal(size=6) for t in CHUNKS + RATIONALES}


def test_dense_ecse_pools_exactly_as_the_reference_formula():
    encoder = Table(TABLE)
    result = MeteoraSelector(encoder, scoring="dense").select(CHUNKS, RATIONALES)
    reference = pooled_scores(np.stack([TABLE[r] for r in RATIONALES]).astype(np.float32),
                              np.stack([TABLE[c] for c in CHUNKS]).astype(np.float32))
    assert result.pooled_scores == reference.tolist()  # the mean unit rationale, not the mean cosine
    assert result.dense_scores == reference.tolist() and result.lexical_scores is None
    assert result.encoder == "table:test" and result.scoring == "dense" and result.pooled_cut == "elbow"


def test_hybrid_ecse_pools_the_fused_scores_with_the_given_weight():
    encoder = Table(TABLE)
    result = MeteoraSelector(encoder, scoring="hybrid", lexical_weight=0.5).select(CHUNKS, RATIONALES)
    vectors = np.stack([TABLE[c] for c in CHUNKS]).astype(np.float32)
    dense = np.stack([[float(np.dot(TABLE[r], v) / np.linalg.norm(TABLE[r].astype(np.float32)) / np.linalg.norm(v))
                       for v in vectors] for r in RATIONALES])
    bm25 = BM25Index.build(bm25_tokens(c) for c in CHUNKS)
    lexical = np.stack([bm25.scores(bm25_tokens(r)) for r in RATIONALES])
    fused = standardise(dense) + 0.5 * standardise(lexical)
    np.testing.assert_allclose(result.pooled_scores, fused.mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(result.pairing_scores, fused.max(axis=0), atol=1e-6)
    np.testing.assert_allclose(result.lexical_scores, lexical.mean(axis=0))
    assert result.pooled_cut == "zscore"


def test_the_json_form_rounds_every_score_to_six_decimals():
    result = MeteoraSelector(Table(TABLE), scoring="hybrid").select(CHUNKS, RATIONALES)
    d = result.to_dict()
    assert sorted(d) == ["details", "encoder", "rationales", "selected_indices"]
    assert d["selected_indices"] == result.selected_indices and d["encoder"] == "table:test"
    assert d["rationales"] == [r.to_dict() for r in result.rationales]
    details = d["details"]
    for key in ("pooled_scores", "dense_scores", "lexical_scores"):
        assert details[key] == [round(s, 6) for s in getattr(result, key)]
        assert details[key] != getattr(result, key)  # the raw scores have more digits
    fused = [round(m["score"], 6) for m in details["rationale_matches"]]
    assert [m["score"] for m in details["rationale_matches"]] == fused
    assert all(m["score"] == round(result.pairing_scores[m["chunk_index"]], 6) for m in details["rationale_matches"])
    assert details["stages"] == {"pairing": True, "pooling": True, "expansion": True}


@pytest.mark.parametrize(("kwargs", "stages"), [
    ({"expansion_window": 0}, {"pairing": True, "pooling": True, "expansion": False}),
    ({"use_pairing": False}, {"pairing": False, "pooling": True, "expansion": True}),
    ({"use_pooling": False, "use_expansion": False}, {"pairing": True, "pooling": False, "expansion": False}),
])
def test_stage_toggles_are_recorded_and_a_stage_off_contributes_nothing(kwargs, stages):
    result = MeteoraSelector(Table(TABLE), **kwargs).select(CHUNKS, RATIONALES)
    assert result.stages == stages
    assert (result.pairing_indices == []) is not stages["pairing"]
    assert (result.pooled_indices == []) is not stages["pooling"]


def test_the_defaults_are_the_documented_ones():
    selector = MeteoraSelector(HashingEncoder())
    assert (selector.expansion_window, selector.elbow_z_threshold, selector.lexical_weight, selector.pooled_z) == (
        1, 1.0, 1.0, 2.0)
    assert (selector.scoring, selector.pooled_cut) == ("dense", "elbow")


def test_the_elbow_threshold_reaches_the_cut():
    scores = [0.9, 0.85, 0.8, 0.5, 0.45, 0.4, 0.1]  # drops .05 .05 .3 .05 .05 .3
    table = {f"c{i}": [s, (1 - s * s) ** 0.5] for i, s in enumerate(scores)} | {"r": [1.0, 0.0]}
    chunks = [f"c{i}" for i in range(7)]
    low = MeteoraSelector(Table(table), expansion_window=0, use_pairing=False).select(chunks, ["r"])
    high = MeteoraSelector(Table(table), expansion_window=0, use_pairing=False, elbow_z_threshold=5.0).select(chunks, ["r"])
    assert low.elbow_index == 2 and low.pooled_indices == [0, 1, 2]
    assert high.elbow_index != 2


def test_a_zscore_cut_keeps_standouts_and_reports_their_count_as_the_elbow():
    table = {f"c{i}": [1.0, 0.0] if i == 3 else [0.0, 1.0] for i in range(8)} | {"r": [1.0, 0.0]}
    chunks = [f"c{i}" for i in range(8)]
    result = MeteoraSelector(Table(table), expansion_window=0, pooled_cut="zscore").select(chunks, ["r"])
    assert result.pooled_indices == [3] and result.elbow_index == 0
    nothing = MeteoraSelector(Table(table), expansion_window=0, pooled_cut="zscore", pooled_z=3.0).select(chunks, ["r"])
    assert nothing.pooled_indices == [] and nothing.elbow_index is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lexical_weight": float("nan")}, "lexical_weight must be a finite number, got nan"),
    ({"pooled_z": "2"}, "pooled_z must be a finite number, got '2'"),
    ({"pooled_z": float("inf")}, "pooled_z must be a finite number, got inf"),
    ({"lexical_weight": -0.5}, "lexical_weight must be >= 0, got -0.5"),
    ({"elbow_z_threshold": float("nan")}, "elbow_z_threshold must be a finite number, got nan"),
    ({"expansion_window": 1.0}, "expansion_window must be an integer >= 0, got 1.0"),
    ({"use_pairing": False, "use_pooling": False}, "use_pairing and use_pooling are both off; turn at least one on"),
])
def test_bad_settings_say_what_is_wrong(kwargs, message):
    with pytest.raises(ConfigError) as info:
        MeteoraSelector(HashingEncoder(), **kwargs)
    assert str(info.value) == message


def test_bad_inputs_say_what_is_wrong():
    selector = MeteoraSelector(HashingEncoder())
    cases = [
        (lambda: selector.select([], ["x"]), "no chunks to select from; give at least one chunk"),
        (lambda: selector.select(["a"], []), "no rationale given; pass at least one rationale or use the query as one"),
        (lambda: selector.plan_auto([], "q"), "no chunks to select from; give at least one chunk"),
        (lambda: selector.select_auto([], "q"), "no chunks to select from; give at least one chunk"),
        (lambda: selector.plan_auto(["a"], " "), "the query must be a non-empty string to write rationales from it"),
        (lambda: selector.select(["a b"], ["x"], chunk_vectors=np.ones((1, 4))),
         "chunk vectors have dimension 4 but rationale vectors 384; embed both with the same encoder"),
    ]
    for call, message in cases:
        with pytest.raises(InputError) as info:
            call()
        assert str(info.value) == message


class ChunkShy(HashingEncoder):
    """A hashing encoder that refuses to embed the chunks (the caller gave their vectors)."""

    def __init__(self, chunks):
        super().__init__()
        self.chunks = set(chunks)

    def encode(self, texts):
        assert not self.chunks & set(texts), "embedded a chunk although its vector was given"
        return super().encode(texts)


BRIDGE = [
    "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
    "Shirley Temple later served as Chief of Protocol, a government position.",
    "Corliss Archer is a fictional teenage girl from radio.",
    "A mayor is elected every four years.",
    "Shirley Temple was born in Santa Monica.",
]
QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


def test_given_chunk_vectors_are_used_by_select_plan_auto_and_select_auto():
    vectors = HashingEncoder().encode(BRIDGE)
    plain = MeteoraSelector(HashingEncoder(), scoring="hybrid").select_auto(BRIDGE, QUESTION)
    shy = MeteoraSelector(ChunkShy(BRIDGE), scoring="hybrid")
    assert shy.select_auto(BRIDGE, QUESTION, chunk_vectors=vectors).to_dict() == plain.to_dict()
    assert shy.plan_auto(BRIDGE, QUESTION, chunk_vectors=vectors).strategy == plain.strategy
    assert shy.select(BRIDGE, ["Chief of Protocol"], chunk_vectors=vectors).selected_indices


def test_select_auto_embeds_the_chunks_once():
    encoder = HashingEncoder()
    calls = []
    original = encoder.encode
    encoder.encode = lambda texts: calls.append(list(texts)) or original(texts)
    MeteoraSelector(encoder, scoring="hybrid").select_auto(BRIDGE, QUESTION)
    assert sum(text in batch for batch in calls for text in BRIDGE) == len(BRIDGE)


def test_a_bridge_plan_numbers_its_rationales_and_excludes_the_first_hop():
    plan = MeteoraSelector(HashingEncoder(), scoring="hybrid").plan_auto(BRIDGE, QUESTION)
    assert plan.strategy == {"name": "auto", "kind": "question", "first_hop": 0, "bridges": ["Shirley Temple"],
                             "second_hop": {"written": True, "reason": "second hop through Shirley Temple",
                                            "considered": {"Kiss and Tell": "a word of the question",
                                                           "Corliss Archer": "a word of the question",
                                                           "Shirley Temple": "bridge (2 other candidates)"}}}
    assert [r.index for r in plan.rationales] == [1, 2] and plan.exclude_rows == (1,)
    assert plan.first_hop_text == BRIDGE[0] and plan.second_hop is plan.rationales[1]


def test_the_first_hop_is_the_question_s_best_chunk_wherever_it_is():
    chunks = [BRIDGE[3], BRIDGE[2], BRIDGE[1], BRIDGE[0], BRIDGE[4]]
    plan = MeteoraSelector(HashingEncoder(), scoring="hybrid").plan_auto(chunks, QUESTION)
    assert plan.strategy["first_hop"] == 3 and plan.first_hop_text == BRIDGE[0]


def test_a_name_only_the_first_hop_mentions_is_no_bridge():
    chunks = ["The tower was built by Gustave Eiffel for the fair.", "Paris hosts many fairs.", "Towers are tall."]
    plan = MeteoraSelector(HashingEncoder(), scoring="hybrid").plan_auto(chunks, "Who built the tower for the fair?")
    assert plan.strategy == {"name": "auto", "kind": "question", "first_hop": 0, "bridges": [], "second_hop": {
        "written": False, "considered": {"Gustave Eiffel": "in no other candidate"},
        "reason": "no second hop: no name of the best chunk is a bridge (Gustave Eiffel: in no other candidate)"}}
    assert plan.first_hop_text == chunks[0] and plan.second_hop is None and len(plan.rationales) == 1


def test_a_comparison_plan_has_no_first_hop():
    plan = MeteoraSelector(HashingEncoder(), scoring="hybrid").plan_auto(["a b"], "Who is older, Annie Morton or Terry Richardson?")
    assert plan.strategy == {"name": "auto", "kind": "comparison", "first_hop": None, "bridges": []}
    assert plan.first_hop_text is None and plan.exclude_rows == ()


def test_chosen_by_names_the_stage_of_each_selected_chunk_the_second_hop_s_pair_apart():
    selector = MeteoraSelector(HashingEncoder(), scoring="hybrid", expansion_window=1, use_pooling=False)
    result = selector.select_auto(BRIDGE, QUESTION)
    assert result.pairing_indices == [0, 1] and result.strategy["bridges"] == ["Shirley Temple"]
    assert result.chosen_by() == {0: "pair", 1: "second-hop pair", 2: "neighbour"}
    given = selector.select(BRIDGE, [QUESTION, result.rationales[1].text])  # the same texts, not the rule's hop
    assert "second-hop pair" not in given.chosen_by().values()


def test_the_second_hop_pairs_elsewhere_even_among_two_chunks():
    chunks = BRIDGE[:2]
    result = MeteoraSelector(HashingEncoder(), scoring="hybrid").select_auto(chunks, QUESTION)
    assert result.strategy["bridges"] == ["Shirley Temple"]
    assert [m["chunk_index"] for m in result.rationale_matches] == [0, 1]
