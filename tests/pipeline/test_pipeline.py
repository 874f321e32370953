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


def test_nothing_survives_verification_then_bm25_fallback_fills_n_min():
    result = make(tau_relevance=0.99, n_min=2, t_max=None).run(QUERY, passages=PASSAGES)
    fb = result.trace.phase("fallback")
    assert fb.details["fired"] and "0 accepted < n_min 2" in fb.details["reason"]
    assert len(fb.details["added"]) == 2 and result.ids == fb.details["added"]
    assert all(c.via_fallback for c in result.trace.candidates if c.kept)


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


def test_budget_smaller_than_any_chunk_keeps_nothing_and_says_so():
    result = make(verification="none", n_min=None, t_max=3).run(QUERY, passages=PASSAGES)
    assert result.passages == []
    assert result.trace.phase("budget").details["cut"]["outcome"] == "dropped: larger than the budget"
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
    result = EvidencePipeline(PipelineConfig(k_init=2, tau_relevance=0.99, n_min=2), encoder=enc, index=index).run(
        "governed laws England")
    assert result.trace.phase("candidates").summary == "2 candidates from knn"
    assert result.trace.phase("fallback").details["scope"] == "index"
    assert 3 in result.ids
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
    engine = MeVeEngine(MeVeConfig(k_init=2, tau_relevance=0.99, n_min=1), vs, lex, encoder=enc)
    assert engine.trace("zebra rules").ids == ["z"]
    with_vectors = {k: ContextChunk(c.content, k, embedding=enc.encode([c.content])[0].tolist()) for k, c in vs.items()}
    with pytest.raises(InputError, match="precomputed embeddings"):
        MeVeEngine(MeVeConfig(), with_vectors, with_vectors)
    assert MeVeEngine(MeVeConfig(tau_relevance=0.1), with_vectors, with_vectors, encoder=enc).trace("paris tower").ids[0] == "a"
