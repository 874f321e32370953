"""The pipeline's phase records: what ``verify``, ``fallback``, ``prioritise`` and ``budget`` write
into the trace (counts, reasons, scores, ids), the run's own checks and trace header, and
``PipelineResult.to_dict``.

The scenarios use a table encoder (each text has a fixed vector, the query is ``[1, 0, 0]``),
ECSE off and dense scoring, so every cosine, every verdict and every BM25 ranking is known.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from meteora_edge import EvidencePipeline, HashingEncoder, InMemoryIndex, PipelineConfig
from meteora_edge.errors import InputError
from meteora_edge.pipeline import engine
from meteora_edge.pipeline.budget import WhitespaceCounter

QUERY = "who may terminate the agreement"
PLAIN = {"use_ecse": False, "scoring": "dense", "rationales": "query"}  # the candidates pass on as they come


def _pipe(table_encoder, vectors: dict[str, list[float]], **settings) -> EvidencePipeline:
    """A pipeline whose encoder knows the query and ``vectors``; ``settings`` override PipelineConfig's."""
    config = PipelineConfig(**{**PLAIN, **settings})
    return EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **vectors}))


def _verdict(relevant: bool) -> dict:
    return {"relevant": relevant, "flagged": False, "reason": "", "flag_types": []}


# -- the run's own checks and the trace header ---------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", None, 5], ids=["empty", "blank", "none", "number"])
def test_a_blank_or_non_text_query_is_refused_with_one_message(query):
    pipe = EvidencePipeline(PipelineConfig(verification="none"))
    with pytest.raises(InputError, match=r"^query must be a non-empty string$"):
        pipe.run(query, passages=["Either party may terminate."])


def test_a_query_may_be_exactly_max_chunk_chars_long_and_not_one_character_more():
    """The limit is inclusive: a 20-character query passes max_chunk_chars=20, 21 characters do not."""
    pipe = EvidencePipeline(PipelineConfig(verification="none", max_chunk_chars=20))
    assert pipe.run("terminate the notice", passages=["terminate now"]).passages == ["terminate now"]
    with pytest.raises(InputError, match=r"^query has 21 characters, over max_chunk_chars=20$"):
        pipe.run("terminate the notices", passages=["terminate now"])


class _PrecisionEncoder(HashingEncoder):
    precision_choice = "int8"


def test_the_trace_header_names_the_query_the_encoder_precision_and_the_tokenizer():
    result = EvidencePipeline(PipelineConfig(verification="none"), encoder=_PrecisionEncoder()).run(
        QUERY, passages=["Either party may terminate."])
    assert result.trace.query == QUERY and result.to_dict()["trace"]["query"] == QUERY
    config = result.trace.config
    assert config["encoder_precision"] == "int8"
    assert config["tokenizer"] == WhitespaceCounter.identity == "whitespace"
    assert config["rung"] == "none" and config["verification"] == "none"
    plain = EvidencePipeline(PipelineConfig(verification="none")).run(QUERY, passages=["Either party may terminate."])
    assert "encoder_precision" in plain.trace.config and plain.trace.config["encoder_precision"] is None


# -- PipelineResult.to_dict ------------------------------------------------------------------------


def test_to_dict_holds_the_passages_ids_scores_to_six_places_score_names_tokens_and_trace(table_encoder):
    """Cosines 1 and 1/sqrt(2): the second score is written rounded to 6 places, 0.707107."""
    vectors = {"either party may terminate": [1.0, 0.0, 0.0], "notice of termination": [1.0, 1.0, 0.0]}
    result = _pipe(table_encoder, vectors, verification="none", n_min=None, theta_redundancy=None, t_max=None).run(
        QUERY, passages=["notice of termination", "either party may terminate"])
    assert result.scores[1] == pytest.approx(1 / math.sqrt(2), abs=1e-12)
    assert result.to_dict() == {
        "passages": ["either party may terminate", "notice of termination"],
        "ids": [1, 0],
        "scores": [1.0, 0.707107],
        "score_names": ["retrieval", "retrieval"],
        "tokens": 7,
        "trace": result.trace.to_dict(),
    }


# -- phase timings -----------------------------------------------------------------------------


class _Clock:
    """A clock that only moves when a fake model spends time (seconds, exact in binary)."""

    def __init__(self, start: float) -> None:
        self.now = start

    def perf_counter(self) -> float:
        return self.now


def test_each_phase_records_the_milliseconds_spent_in_it(table_encoder, monkeypatch):
    """The cross-encoder takes 0.5 s (the verify phase) and the tokenizer 0.25 s (the budget phase)."""
    clock = _Clock(100.0)
    monkeypatch.setattr(engine, "time", SimpleNamespace(perf_counter=clock.perf_counter))

    class SlowCrossEncoder:
        def score(self, query, passages):
            clock.now += 0.5
            return np.full(len(passages), 0.9)

    class SlowCounter:
        identity = "slow-words"

        def count(self, texts):
            clock.now += 0.25
            return [len(t.split()) for t in texts]

    vectors = {"either party may terminate": [1.0, 0.0, 0.0]}
    config = PipelineConfig(**PLAIN, n_min=None, theta_redundancy=None, t_max=50)
    pipe = EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **vectors}),
                            cross_encoder=SlowCrossEncoder(), token_counter=SlowCounter())
    result = pipe.run(QUERY, passages=list(vectors))
    assert {p.name: p.ms for p in result.trace.phases} == {
        "candidates": 0.0, "selection": 0.0, "verify": 500.0, "fallback": 0.0, "prioritise": 0.0, "budget": 250.0}
    assert result.to_dict()["trace"]["total_ms"] == 750.0


# -- verify ------------------------------------------------------------------------------------

THREE = {"either party may terminate": [1.0, 0.0, 0.0],  # cosine 1
         "terminate on notice": [0.6, 0.8, 0.0],  # cosine 0.6
         "terminate for breach": [0.0, 1.0, 0.0]}  # cosine 0


def test_the_cosine_rung_records_its_threshold_and_what_it_accepted(table_encoder):
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=0.5, n_min=None,
                   theta_redundancy=None, t_max=None).run(QUERY, passages=list(THREE))
    verify = result.trace.phase("verify")
    assert verify.summary == "rung cosine: 2 of 3 accepted"
    assert verify.details == {"rung": "cosine", "tau": 0.5, "accepted": [0, 1], "flagged": [], "errors": [],
                              "token_cover": {"min_gain": 0.05, "z": 0.5,
                                              "skipped": "no selection scores (ECSE off)"}}
    records = result.trace.candidates
    assert [r.verified for r in records] == [True, True, False]
    assert [r.relevance for r in records] == pytest.approx([1.0, 0.6, 0.0])
    assert {r.verified_by for r in records} == {"cosine"}


def test_a_cosine_verdict_leaves_the_priority_the_retrieval_score(table_encoder):
    """Only the cross-encoder's probability replaces the retrieval score as the priority."""
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=0.5, n_min=None,
                   theta_redundancy=None, t_max=None).run(QUERY, passages=list(THREE))
    assert result.ids == [0, 1]
    assert result.score_names == ["retrieval", "retrieval"]
    assert result.scores == pytest.approx([1.0, 0.6])


def test_the_cross_encoder_rung_records_its_threshold_and_its_scores_become_the_priority(table_encoder):
    class Fake:
        def score(self, query, passages):
            return np.array([0.3 if "breach" in p else 0.7 for p in passages])

    config = PipelineConfig(**PLAIN, tau_relevance=0.5, n_min=None, theta_redundancy=None, t_max=None)
    pipe = EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **THREE}), cross_encoder=Fake())
    result = pipe.run(QUERY, passages=list(THREE))
    verify = result.trace.phase("verify")
    assert verify.summary == "rung cross-encoder: 2 of 3 accepted"
    assert verify.details == {"rung": "cross-encoder", "tau": 0.5, "accepted": [0, 1], "flagged": [], "errors": [],
                              "token_cover": {"min_gain": 0.05, "z": 0.5,
                                              "skipped": "no selection scores (ECSE off)"}}
    assert result.score_names == ["cross-encoder", "cross-encoder"] and result.scores == [0.7, 0.7]


@pytest.mark.parametrize("rung", ["none", "llm"])
def test_rungs_without_a_threshold_record_none_as_tau(table_encoder, rung):
    config = PipelineConfig(**PLAIN, verification=rung, tau_relevance=0.5, n_min=None, theta_redundancy=None,
                            t_max=None)
    pipe = EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **THREE}),
                            verifier=lambda request: _verdict("breach" not in request.chunk))
    verify = pipe.run(QUERY, passages=list(THREE)).trace.phase("verify")
    accepted = [0, 1, 2] if rung == "none" else [0, 1]
    skipped = "verification is off (every selected chunk is accepted)" if rung == "none" else \
        "no selection scores (ECSE off)"
    assert verify.details == {"rung": rung, "tau": None, "accepted": accepted, "flagged": [], "errors": [],
                              "token_cover": {"min_gain": 0.05, "z": 0.5, "skipped": skipped}}
    assert verify.summary == f"rung {rung}: {len(accepted)} of 3 accepted"


# -- fallback ----------------------------------------------------------------------------------


def test_the_fallback_off_says_so(table_encoder):
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=0.5, n_min=None).run(
        QUERY, passages=list(THREE))
    fallback = result.trace.phase("fallback")
    assert fallback.summary == "not needed (off)"
    assert fallback.details == {"fired": False, "reason": "off"}


def test_the_fallback_not_needed_gives_the_count_against_n_min(table_encoder):
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=0.5, n_min=2).run(
        QUERY, passages=list(THREE))
    fallback = result.trace.phase("fallback")
    assert fallback.summary == "not needed (2 accepted >= n_min 2)"
    assert fallback.details == {"fired": False, "reason": "2 accepted >= n_min 2"}


def test_chunks_the_rung_rejected_on_content_never_come_back_through_the_fallback(table_encoder):
    """ECSE off: every candidate was judged; the one rejected (it has the query's words, so BM25
    would find it) stays out, and BM25 over the candidates has nothing new."""
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=0.5, n_min=3,
                   theta_redundancy=None, t_max=None).run(QUERY, passages=list(THREE))
    fallback = result.trace.phase("fallback")
    assert fallback.summary == ("fired (2 accepted < n_min 3); BM25 over the candidates: 0 added, "
                                "0 refused by verification — BM25 found nothing new")
    assert fallback.details == {"fired": True, "reason": "2 accepted < n_min 3", "scope": "candidates", "added": [],
                                "refused": [], "excluded_flagged": [], "verified_by": []}
    assert result.ids == [0, 1] and result.trace.candidates[2].bm25_score is None


GARBLED = {"clause on insurance": [0.0, 1.0, 0.0],  # rejected by the verifier
           "may terminate": [0.6, 0.8, 0.0],  # the verifier answers garbage; BM25's second
           "fees are monthly": [0.0, 0.0, 1.0],  # rejected by the verifier
           "who may terminate the agreement terminate": [0.8, 0.6, 0.0],  # garbage again; BM25's first
           "rent is due in advance": [0.0, 0.0, 1.0],  # two more rejected chunks, so that the query's
           "the deposit is returned": [0.0, 0.0, 1.0]}  # words are rare enough for BM25 to weigh them


def _garbling_verifier(request):
    return "I cannot say!!" if "terminate" in request.chunk else _verdict(False)


def test_chunks_the_llm_could_not_judge_are_judged_again_on_cosine_in_bm25_order(table_encoder):
    """Nothing accepted; the two chunks the LLM could not judge come back through the fallback,
    BM25's best first (position 3, then 1), judged by the cosine rung; each one's priority is its BM25 score."""
    config = PipelineConfig(**PLAIN, n_min=2, tau_relevance=0.5, theta_redundancy=None, t_max=None)
    pipe = EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **GARBLED}),
                            verifier=_garbling_verifier)
    result = pipe.run(QUERY, passages=list(GARBLED))
    assert result.trace.phase("verify").details["errors"] == [1, 3]
    fallback = result.trace.phase("fallback")
    assert fallback.details["added"] == [3, 1] and fallback.details["refused"] == []
    assert fallback.details["verified_by"] == ["cosine"]
    assert fallback.summary == ("fired (0 accepted < n_min 2); BM25 over the candidates: 2 added, "
                                "0 refused by verification")
    records = result.trace.candidates
    assert records[3].bm25_score > records[1].bm25_score > 0
    assert result.ids == [3, 1] and result.score_names == ["bm25", "bm25"]
    assert result.scores == [records[3].bm25_score, records[1].bm25_score]
    assert [records[p].relevance for p in (3, 1)] == pytest.approx([0.8, 0.6])


def test_with_a_cross_encoder_the_chunks_the_llm_could_not_judge_go_to_the_cross_encoder(table_encoder):
    class Fake:
        def score(self, query, passages):
            return np.array([0.75 for _ in passages])

    config = PipelineConfig(**PLAIN, verification="llm", n_min=2, tau_relevance=0.5, theta_redundancy=None,
                            t_max=None)
    pipe = EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **GARBLED}),
                            verifier=_garbling_verifier, cross_encoder=Fake())
    result = pipe.run(QUERY, passages=list(GARBLED))
    fallback = result.trace.phase("fallback").details
    assert fallback["added"] == [3, 1] and fallback["verified_by"] == ["cross-encoder"]
    assert [result.trace.candidates[p].verified_by for p in (3, 1)] == ["cross-encoder", "cross-encoder"]
    assert [result.trace.candidates[p].relevance for p in (3, 1)] == [0.75, 0.75]


def test_the_fallback_stops_judging_once_it_has_what_it_needs(table_encoder):
    """One chunk needed: BM25's best (position 3) passes the cosine rung, so the next errored
    chunk (position 1, which the cosine rung would refuse) is never judged."""
    vectors = {**GARBLED, "may terminate": [0.0, 1.0, 0.0]}
    config = PipelineConfig(**PLAIN, n_min=1, tau_relevance=0.5, theta_redundancy=None, t_max=None)
    pipe = EvidencePipeline(config, encoder=table_encoder({QUERY: [1.0, 0.0, 0.0], **vectors}),
                            verifier=_garbling_verifier)
    result = pipe.run(QUERY, passages=list(vectors))
    fallback = result.trace.phase("fallback").details
    assert fallback["added"] == [3] and fallback["refused"] == []
    assert result.trace.candidates[1].bm25_score is None and result.trace.candidates[1].verified_by == "llm"
    assert result.ids == [3]


def test_an_index_hit_the_llm_could_not_judge_is_judged_once_more_one_rung_lower(table_encoder):
    """kNN brings chunk 0 (accepted). BM25 over the index brings two new chunks (positions 1
    and 2): the LLM accepts the first and cannot judge the second, which the cosine rung then
    accepts — it is added once, never also counted as refused."""
    texts = ["clause seven covers insurance", "either party may terminate the agreement",
             "terminate the agreement garbled"]
    vectors = {texts[0]: [1.0, 0.0, 0.0], texts[1]: [0.8, 0.6, 0.0], texts[2]: [0.8, 0.6, 0.0]}
    encoder = table_encoder({QUERY: [1.0, 0.0, 0.0], **vectors})
    index = InMemoryIndex(texts, encoder, labels=["c0", "c1", "c2"])

    def verifier(request):
        return "unreadable" if "garbled" in request.chunk else _verdict(True)

    config = PipelineConfig(**PLAIN, k_init=1, n_min=3, tau_relevance=0.5, theta_redundancy=None, t_max=None)
    result = EvidencePipeline(config, encoder=encoder, index=index, verifier=verifier).run(QUERY)
    assert [c.chunk_id for c in result.trace.candidates] == ["c0", "c1", "c2"]
    fallback = result.trace.phase("fallback")
    assert fallback.details["added"] == ["c1", "c2"] and fallback.details["refused"] == []
    assert fallback.details["verified_by"] == ["cosine", "llm"] and fallback.details["scope"] == "index"
    assert fallback.summary == "fired (1 accepted < n_min 3); BM25 over the index: 2 added, 0 refused by verification"
    assert result.trace.phase("verify").details["errors"] == []  # the verify phase judged only chunk 0
    assert [c.verified_by for c in result.trace.candidates] == ["llm", "llm", "cosine"]
    assert result.ids == [0, 1, 2]


# -- prioritise --------------------------------------------------------------------------------

DUPLICATES = {"either party may terminate": [1.0, 0.0, 0.0],
              "either party may terminate it": [0.99, 0.141, 0.0],  # cosine 0.99 to the first
              "terminate on notice": [0.6, 0.8, 0.0]}


def test_prioritise_without_dedup_names_the_count_and_the_score(table_encoder):
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=0.5, n_min=None,
                   theta_redundancy=None, t_max=None).run(QUERY, passages=list(THREE))
    prioritise = result.trace.phase("prioritise")
    assert prioritise.summary == "2 ordered by retrieval; dedup off"
    assert prioritise.details == {"theta": None, "priority": ["retrieval"]}


def test_prioritise_with_dedup_names_what_was_dropped_and_by_which_chunk(table_encoder):
    result = _pipe(table_encoder, DUPLICATES, verification="none", n_min=None, theta_redundancy=0.9,
                   t_max=None).run(QUERY, passages=list(DUPLICATES))
    prioritise = result.trace.phase("prioritise")
    assert prioritise.summary == "2 kept by retrieval score, 1 near-duplicates dropped (cosine > 0.9)"
    assert prioritise.details == {"theta": 0.9, "priority": ["retrieval"], "dropped": {"1": 0}}
    dropped = result.trace.candidates[1]
    assert dropped.duplicate_of == 0 and dropped.duplicate_cosine == pytest.approx(0.99 / math.hypot(0.99, 0.141))
    assert result.trace.candidates[0].duplicate_of is None and result.ids == [0, 2]


@pytest.mark.parametrize(("theta", "summary"), [
    (None, "0 ordered by -; dedup off"),
    (0.9, "0 kept by - score, 0 near-duplicates dropped (cosine > 0.9)"),
])
def test_prioritise_with_nothing_accepted_names_no_score(table_encoder, theta, summary):
    result = _pipe(table_encoder, THREE, verification="cosine", tau_relevance=1.0, n_min=None,
                   theta_redundancy=theta, t_max=None).run(QUERY, passages=list(THREE)[1:])  # cosines 0.6 and 0
    prioritise = result.trace.phase("prioritise")
    assert prioritise.summary == summary and prioritise.details["priority"] == []
    assert result.passages == []


# -- budget ------------------------------------------------------------------------------------


def test_without_a_budget_every_chunk_is_kept_and_counted(table_encoder):
    result = _pipe(table_encoder, THREE, verification="none", n_min=None, theta_redundancy=None, t_max=None).run(
        QUERY, passages=list(THREE))
    budget = result.trace.phase("budget")
    assert budget.summary == "no budget; 10 tokens"
    assert budget.details == {"tokenizer": "whitespace", "t_max": None}
    assert [(c.tokens, c.budget, c.kept) for c in result.trace.candidates] == [(4, "kept", True), (3, "kept", True),
                                                                               (3, "kept", True)]
    assert result.tokens == 10


def test_the_budget_records_what_it_used_and_where_it_first_cut(table_encoder):
    """t_max 5: chunk 0 (4 words) fits, chunk 1 (3 words) does not fit the 1 left, chunk 2 does not either."""
    result = _pipe(table_encoder, THREE, verification="none", n_min=None, theta_redundancy=None, t_max=5).run(
        QUERY, passages=list(THREE))
    budget = result.trace.phase("budget")
    assert budget.summary == "1 chunks, 4/5 tokens; first cut at chunk 1 (skipped: needs 3, 1 left)"
    assert budget.details == {"tokenizer": "whitespace", "t_max": 5, "used": 4, "oversize": "drop",
                              "cut": {"chunk": 1, "outcome": "skipped: needs 3, 1 left"}}
    assert [(c.budget, c.kept) for c in result.trace.candidates] == [
        ("kept", True), ("skipped: needs 3, 1 left", False), ("skipped: needs 3, 1 left", False)]
    assert result.passages == ["either party may terminate"] and result.tokens == 4


def test_a_truncated_chunk_is_not_a_cut(table_encoder):
    """t_max 6 with oversize truncate: chunk 0 (4 words) fits, the 8-word chunk is cut to the 2 words left."""
    vectors = {"either party may terminate": [1.0, 0.0, 0.0],
               "terminate on notice given in writing by either": [0.6, 0.8, 0.0]}
    result = _pipe(table_encoder, vectors, verification="none", n_min=None, theta_redundancy=None, t_max=6,
                   oversize="truncate").run(QUERY, passages=list(vectors))
    budget = result.trace.phase("budget")
    assert budget.summary == "2 chunks, 6/6 tokens"
    assert budget.details == {"tokenizer": "whitespace", "t_max": 6, "used": 6, "oversize": "truncate", "cut": None}
    assert result.passages == ["either party may terminate", "terminate on"]
    assert [(c.tokens, c.budget, c.kept) for c in result.trace.candidates] == [(4, "kept", True),
                                                                               (2, "truncated", True)]


# -- a one- or two-word query: the chunks holding its words pass the cosine rung ---------------------

NOTICES = {"either party may terminate on ninety days written notice": [0.0, 1.0, 0.0],
           "notices are delivered by hand": [0.0, 0.0, 1.0],
           "fees are due monthly": [0.0, 0.6, 0.8]}


@pytest.mark.parametrize(("query", "kept"), [
    ("notice", {0, 1}),  # "notices" stems to the query's term
    ("written notice", {0}),  # both words: only the termination clause holds them
    ("NOTICE?", {0, 1}),
])
def test_a_keyword_query_keeps_the_chunks_holding_its_words_that_the_cosine_rung_rejects(table_encoder, query, kept):
    encoder = table_encoder({query: [1.0, 0.0, 0.0], **NOTICES})  # every chunk has cosine 0 to the query
    config = PipelineConfig(**PLAIN, verification="cosine", tau_relevance=0.3, n_min=None, theta_redundancy=None,
                            t_max=None)
    result = EvidencePipeline(config, encoder=encoder).run(query, passages=list(NOTICES))
    assert set(result.ids) == kept
    assert {r.verified_by for r in result.trace.candidates if r.verified} == {engine.KEYWORDS}
    assert result.trace.phase("verify").summary == f"rung cosine: {len(kept)} of 3 accepted"


def test_a_question_of_three_words_or_more_is_still_judged_by_its_cosine(table_encoder):
    query = "the written notice"
    encoder = table_encoder({query: [1.0, 0.0, 0.0], **NOTICES})
    config = PipelineConfig(**PLAIN, verification="cosine", tau_relevance=0.3, n_min=None, t_max=None)
    assert EvidencePipeline(config, encoder=encoder).run(query, passages=list(NOTICES)).ids == []
