import json

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.errors import ConfigError, InputError, LocalIndexError
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.pipeline.meve import ContextChunk, MeVeConfig, MeVeEngine, setup_simulation_data
from meteora_edge.pipeline.engine import EvidencePipeline, PipelineConfig

PASSAGES = [
    "Either party may terminate the agreement on ninety days written notice.",
    "Fees are payable monthly within thirty days of the invoice.",
    "Either party may terminate the agreement on ninety days written notice!",  # near-duplicate of 0
    "The agreement is governed by the laws of England and Wales.",
    "A party may terminate immediately for material breach not cured in thirty days.",
]
QUERY = "may a party terminate the agreement with notice"


def make(**cfg):
    return EvidencePipeline(PipelineConfig(**cfg))


def test_full_run_records_every_phase_and_returns_callers_objects():
    docs = [{"text": t, "n": i} for i, t in enumerate(PASSAGES)]
    result = make(tau_relevance=0.2, t_max=200).run(QUERY, passages=docs)
    names = [p.name for p in result.trace.phases]
    assert names == ["candidates", "selection", "verify", "fallback", "prioritise", "budget"]
    assert all(any(d is doc for doc in docs) for d in result.documents)
    assert result.passages == [d["text"] for d in result.documents]
    data = json.loads(json.dumps(result.to_dict()))
    assert data["trace"]["config"]["rung"] == "cosine"
    assert "query:" in result.trace.to_table()


def test_near_duplicate_is_absorbed_by_the_higher_ranked_chunk():
    result = make(verification="none", use_ecse=False, n_min=None, theta_redundancy=0.85, t_max=None).run(
        QUERY, passages=PASSAGES)
    dropped = result.trace.phase("prioritise").details["dropped"]
    assert dropped in ({"2": 0}, {"0": 2})
    assert len(result.passages) == len(PASSAGES) - 1


def test_every_chunk_a_duplicate_keeps_exactly_one():
    same = ["the same clause text"] * 4
    result = make(verification="none", n_min=None, use_ecse=False).run("clause", passages=same)
    assert result.ids == [0]
    assert len(result.trace.phase("prioritise").details["dropped"]) == 3


def test_nothing_survives_verification_then_bm25_fallback_fills_n_min_with_verified_hits():
    def only_breach_and_law(request):  # rejects what ECSE picked, accepts two other clauses BM25 finds
        ok = "breach" in request.chunk or "governed" in request.chunk
        return {"relevant": ok, "flagged": False, "reason": "", "flag_types": []}

    pipe = EvidencePipeline(PipelineConfig(n_min=2, t_max=None), verifier=only_breach_and_law)
    result = pipe.run(QUERY, passages=PASSAGES)
    fb = result.trace.phase("fallback")
    assert fb.details["fired"] and "0 accepted < n_min 2" in fb.details["reason"]
    assert sorted(fb.details["added"]) == [3, 4] and sorted(result.ids) == [3, 4]
    assert all(c.via_fallback and c.verified and c.verified_by == "llm" for c in result.trace.candidates if c.kept)


def test_fallback_hits_that_fail_verification_never_enter_the_context():
    result = make(tau_relevance=0.99, n_min=2, t_max=None).run(QUERY, passages=PASSAGES)
    fb = result.trace.phase("fallback")
    assert fb.details["fired"] and fb.details["added"] == [] and fb.details["refused"]
    assert result.passages == []
    assert all(c.verified is False for c in result.trace.candidates if c.via_fallback is False and c.bm25_score)


def test_fallback_that_finds_nothing_gives_an_empty_result_with_the_reason():
    result = make(tau_relevance=0.99, n_min=3).run("zebra quantum", passages=PASSAGES)
    assert result.passages == [] and result.tokens == 0
    assert "BM25 found nothing new" in result.trace.phase("fallback").summary


def test_flagged_chunks_never_come_back_through_the_fallback():
    def verifier(request):
        flagged = "breach" in request.chunk
        return {"relevant": True, "flagged": flagged, "reason": "", "flag_types": ["RULE"] if flagged else []}

    pipe = EvidencePipeline(PipelineConfig(use_ecse=False, n_min=5, t_max=None, theta_redundancy=None),
                            verifier=verifier)
    result = pipe.run("terminate breach", passages=PASSAGES)
    assert 4 not in result.ids
    assert result.trace.phase("fallback").details["excluded_flagged"] == [4]
    assert result.trace.candidates[4].verdict["flag_types"] == ["RULE"]


def test_budget_smaller_than_any_chunk_cuts_the_best_one_to_fit_and_says_so():
    result = make(verification="none", n_min=None, t_max=3).run(QUERY, passages=PASSAGES)
    assert len(result.passages) == 1 and result.tokens == 3
    best = result.ids[0]
    assert PASSAGES[best].startswith(result.passages[0]) and len(PASSAGES[best].split()) > 3
    budget = result.trace.phase("budget")
    assert budget.details["note"].startswith(f"every chunk is larger than t_max 3: chunk {best} (")
    assert "was cut to 3 tokens" in budget.summary
    assert result.trace.candidates[best].budget.startswith("truncated: every chunk is larger than the budget")
    truncated = make(verification="none", n_min=None, t_max=3, oversize="truncate").run(QUERY, passages=PASSAGES)
    assert len(truncated.passages) == 1 and len(truncated.passages[0].split()) == 3


def test_budget_is_respected_and_greedy():
    result = make(verification="none", n_min=None, theta_redundancy=None, use_ecse=False, t_max=25).run(
        QUERY, passages=PASSAGES)
    assert 0 < result.tokens <= 25
    assert result.tokens == sum(len(p.split()) for p in result.passages)


def test_index_mode_with_knn_and_index_wide_fallback(tmp_path):
    enc = HashingEncoder()
    docs = [SourceDocument(str(i), t, {}) for i, t in enumerate(PASSAGES)]
    index = LocalIndex.build(tmp_path / "ix", docs, enc)
    def only_england(request):
        ok = "England" in request.chunk
        return {"relevant": ok, "flagged": False, "reason": "", "flag_types": []}

    config = PipelineConfig(k_init=2, scoring="dense", rationales="query", n_min=1)
    result = EvidencePipeline(config, encoder=enc, index=index, verifier=only_england).run(
        "terminate the agreement with notice in England")
    assert result.trace.phase("candidates").summary == "2 candidates from knn (dense scores)"
    assert 3 not in [c.chunk_id for c in result.trace.candidates[:2]]
    assert result.trace.phase("fallback").details["scope"] == "index"
    assert result.ids == [3]
    assert all(isinstance(d, dict) and "source" in d for d in result.documents)


def test_index_from_another_encoder_is_refused(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", [SourceDocument("a", "text here", {})], HashingEncoder(n_features=64))
    with pytest.raises(LocalIndexError, match="built with encoder"):
        EvidencePipeline(PipelineConfig(), index=index)


@pytest.mark.parametrize("kwargs", [
    {"k_init": 0}, {"verification": "magic"}, {"n_min": -1}, {"theta_redundancy": 1.5}, {"t_max": 0},
    {"oversize": "squeeze"}, {"expansion_window": -1}, {"max_candidates": 0},
])
def test_bad_config(kwargs):
    with pytest.raises(ConfigError):
        PipelineConfig(**kwargs)


def test_config_round_trips_and_refuses_unknown_keys():
    cfg = PipelineConfig(k_init=7, t_max=None)
    assert PipelineConfig.from_dict(json.loads(cfg.to_json())) == cfg
    with pytest.raises(ConfigError, match="unknown"):
        PipelineConfig.from_dict({"k": 3})


def test_bad_run_inputs_and_limits():
    with pytest.raises(InputError, match="non-empty"):
        make().run("  ", passages=PASSAGES)
    with pytest.raises(InputError, match="no candidates"):
        make().run("q")
    with pytest.raises(InputError, match="max_candidates"):
        make(max_candidates=2).run("q", passages=PASSAGES)
    with pytest.raises(InputError, match="max_chunk_chars"):
        make(max_chunk_chars=10).run("q", passages=PASSAGES)
    with pytest.raises(ConfigError, match="needs a verifier"):
        make(verification="llm")


def test_cross_encoder_rung_uses_tau_on_its_scores():
    class Fake:
        def score(self, query, passages):
            return np.array([0.9 if "terminate" in p else 0.1 for p in passages])

    pipe = EvidencePipeline(PipelineConfig(tau_relevance=0.5, n_min=None, theta_redundancy=None, use_ecse=False),
                            cross_encoder=Fake())
    result = pipe.run(QUERY, passages=PASSAGES)
    assert sorted(result.ids) == [0, 2, 4]
    assert result.trace.phase("verify").details["rung"] == "cross-encoder"


def test_meve_seed_usage_runs_as_written():
    vector_store, bm25_index = setup_simulation_data()
    config = MeVeConfig(k_init=5, tau_relevance=0.5, n_min=3, theta_redundancy=0.85, t_max=100)
    engine = MeVeEngine(config, vector_store, bm25_index)
    result = engine.run("Where is the Eiffel Tower?")
    assert isinstance(result, str) and "Eiffel Tower" in result
    assert len(result.split()) <= 100
    traced = engine.trace("Where is the Eiffel Tower?")
    assert all(isinstance(d, ContextChunk) for d in traced.documents)
    assert traced.ids[0].startswith("paris")


def test_meve_with_separate_bm25_store_and_precomputed_embeddings():
    enc = HashingEncoder()
    vs = {"a": ContextChunk("tower in paris", "a"), "b": ContextChunk("colosseum in rome", "b")}
    lex = {"z": ContextChunk("zebra crossing rules", "z")}
    engine = MeVeEngine(MeVeConfig(k_init=2, tau_relevance=0.5, n_min=1), vs, lex, encoder=enc)
    result = engine.trace("zebra rules")
    assert result.ids == ["z"]  # kNN's two fail the cosine rung; BM25's hit passes it
    assert result.trace.phase("fallback").details["added"] == ["z"]
    with_vectors = {k: ContextChunk(c.content, k, embedding=enc.encode([c.content])[0].tolist()) for k, c in vs.items()}
    with pytest.raises(InputError, match="precomputed embeddings"):
        MeVeEngine(MeVeConfig(), with_vectors, with_vectors)
    assert MeVeEngine(MeVeConfig(tau_relevance=0.1), with_vectors, with_vectors, encoder=enc).trace("paris tower").ids[0] == "a"


# -- hybrid scoring, rule-written rationales, one named score per phase --------------------


def test_trace_records_the_scoring_and_both_component_scores_per_candidate():
    result = make(t_max=None).run(QUERY, passages=PASSAGES)
    assert result.trace.config["scoring"] == "hybrid"
    for c in result.trace.candidates:
        assert c.dense_score is not None and c.lexical_score is not None and c.retrieval_score is not None
    ecse = result.trace.phase("selection").details["ecse"]
    assert ecse["scoring"] == "hybrid" and len(ecse["lexical_scores"]) == len(PASSAGES)
    assert result.trace.phase("selection").details["rationale_source"] == "auto"


def test_dense_scoring_records_no_lexical_part():
    result = make(scoring="dense", rationales="query", t_max=None).run(QUERY, passages=PASSAGES)
    assert all(c.lexical_score is None for c in result.trace.candidates)
    assert result.trace.phase("selection").details["ecse"]["pooled_cut"] == "elbow"


def test_hybrid_index_candidates_include_bm25_hits_that_knn_misses(tmp_path):
    # a table encoder whose vectors make the lexical match the worst kNN hit
    texts = ["alpha one", "alpha two", "alpha three", "zanzibar treaty signed"]
    table = {"alpha one": [1, 0], "alpha two": [1, 0.1], "alpha three": [1, 0.2], "zanzibar treaty signed": [0, 1],
             "zanzibar treaty": [1, 0]}

    class Table:
        identity = "table:2"

        def encode(self, batch):
            return np.array([table.get(t, [1, 0]) for t in batch], dtype=np.float32)

    enc = Table()
    from meteora_edge.index.memory_index import InMemoryIndex

    index = InMemoryIndex(texts, enc)
    dense = EvidencePipeline(PipelineConfig(k_init=2, scoring="dense", rationales="query"), encoder=enc, index=index)
    hybrid = EvidencePipeline(PipelineConfig(k_init=2), encoder=enc, index=index)
    assert 3 not in [c.chunk_id for c in dense.run("zanzibar treaty").trace.candidates]
    run = hybrid.run("zanzibar treaty")
    assert 3 in [c.chunk_id for c in run.trace.candidates]
    assert run.trace.phase("candidates").details["source"] == "knn+bm25"
    record = next(c for c in run.trace.candidates if c.chunk_id == 3)
    assert record.lexical_score > 0 and record.dense_score == 0.0


def test_rule_written_rationales_retrieve_their_own_candidates_from_the_index(tmp_path):
    enc = HashingEncoder()
    chunks = [
        "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer.",
        "Shirley Temple later served as Chief of Protocol, a government position.",
        "The woman who portrayed Corliss Archer in the film was Shirley Temple.",
    ] + [f"Filler sentence number {i} about weather and rivers." for i in range(30)]
    docs = [SourceDocument(str(i), t, {}) for i, t in enumerate(chunks)]
    index = LocalIndex.build(tmp_path / "ix", docs, enc, chunk_size=400)
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    result = EvidencePipeline(PipelineConfig(k_init=2, n_min=None), encoder=enc, index=index).run(question)
    first_pool = [c.chunk_id for c in result.trace.candidates if not c.retrieved_for]
    assert 1 not in first_pool  # the question alone does not retrieve the bridge evidence
    fetched = [c for c in result.trace.candidates if c.retrieved_for]
    assert fetched and all("second hop" in c.retrieved_for for c in fetched)
    strategy = result.trace.phase("selection").details["ecse"]["rationale_strategy"]
    assert strategy["bridges"] == ["Shirley Temple"]
    assert any("Chief of Protocol" in p for p in result.passages)


def test_an_unusable_verifier_answer_is_an_error_not_a_flag_and_the_fallback_judges_one_rung_lower():
    pipe = EvidencePipeline(PipelineConfig(n_min=2, tau_relevance=0.0, t_max=None, theta_redundancy=None),
                            verifier=lambda request: "I think it is fine!!")
    result = pipe.run(QUERY, passages=PASSAGES)
    verify = result.trace.phase("verify").details
    assert verify["flagged"] == [] and verify["errors"]  # PARSE_ERROR: rejected, but not a content flag
    fallback = result.trace.phase("fallback").details
    assert len(fallback["added"]) == 2 and fallback["verified_by"] == ["cosine"]
    assert result.passages  # a model that answers garbage does not empty the context


def test_priority_follows_one_named_score_best_first():
    result = make(verification="none", use_ecse=False, n_min=None, theta_redundancy=None, t_max=None).run(
        QUERY, passages=PASSAGES)
    assert set(result.score_names) == {"retrieval"}
    assert result.scores == sorted(result.scores, reverse=True)
    records = {c.candidate: c for c in result.trace.candidates}
    assert [records[i].priority for i in result.ids] == result.scores
    assert [records[i].priority_rank for i in result.ids] == list(range(len(result.ids)))


def test_cross_encoder_scores_decide_the_order_when_that_rung_judges():
    class Reverse:  # scores the passages in the opposite of their retrieval order
        def score(self, query, passages):
            return np.array([1.0 - PASSAGES.index(p) / 10 for p in passages])

    pipe = EvidencePipeline(PipelineConfig(use_ecse=False, n_min=None, theta_redundancy=None, t_max=None,
                                           tau_relevance=0.0), cross_encoder=Reverse())
    result = pipe.run(QUERY, passages=PASSAGES)
    assert set(result.score_names) == {"cross-encoder"}
    assert result.ids == [0, 1, 2, 3, 4]  # the cross-encoder's order, not the cosine order
    assert result.trace.phase("prioritise").details["priority"] == ["cross-encoder"]


def test_fallback_hits_come_after_verified_chunks_in_bm25_order():
    def only_first(request):
        ok = request.chunk == PASSAGES[0] or "Fees" in request.chunk or "governed" in request.chunk
        return {"relevant": ok, "flagged": False, "reason": "", "flag_types": []}

    pipe = EvidencePipeline(PipelineConfig(n_min=3, t_max=None, theta_redundancy=None), verifier=only_first)
    result = pipe.run(QUERY, passages=PASSAGES, rationales=["terminate with notice"])
    assert result.trace.phase("fallback").details["added"]
    names = result.score_names
    assert names[0] != "bm25" and names[-1] == "bm25"
    fallback_scores = [s for s, n in zip(result.scores, names) if n == "bm25"]
    assert fallback_scores == sorted(fallback_scores, reverse=True)
