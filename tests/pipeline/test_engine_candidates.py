"""The candidates phase of :class:`EvidencePipeline` and the retrieval that feeds it.

* the caller's passages: limits (inclusive), the trace's summary and details, empty input;
* the scores every candidate carries: the dense part (the cosine of unnormalised embeddings,
  summed in float64, 0 for a zero vector), the lexical part, and the retrieval score fused from them by the configured scoring;
* an index: kNN ∪ BM25, the index's labels in the trace, an index search that finds nothing;
* second-hop retrieval: each rule-written rationale (not the question itself) fetches its own
  kNN (and, unless scoring is dense, BM25) hits from the index;
* the BM25 fallback's pool: blocked chunks do not use up the hits it asks for.
"""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge import EvidencePipeline, HashingEncoder, InMemoryIndex, PipelineConfig
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.selection.stages import fuse_scores

QUERY = "who may terminate the agreement"
PASSAGES = [
    "Either party may terminate the agreement on written notice.",
    "Fees are payable monthly.",
    "The agreement is governed by the laws of England.",
    "A party may terminate for material breach.",
]
MORE = PASSAGES + ["Rent is due on the first day of the month.", "Notices must be in writing.",
                   "Rivers flood in the autumn.", "The weather was mild that spring."]  # BM25 needs a corpus
PASS_ALL = {"verification": "none", "n_min": None, "theta_redundancy": None, "t_max": None}


def _candidates(result):
    return result.trace.candidates


class WithoutIds:
    """An index whose records carry no ``id``: the pipeline labels their chunks by chunk id."""

    def __init__(self, inner: InMemoryIndex) -> None:
        self.inner, self.encoder_id = inner, inner.encoder_id

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def records(self, ids):
        return [{k: v for k, v in record.items() if k != "id"} for record in self.inner.records(ids)]


# -- the caller's passages: limits and the phase record ------------------------------------------


def test_exactly_max_candidates_passages_are_accepted_and_one_more_is_refused():
    """``max_candidates`` is the largest number of passages a run takes."""
    ok = EvidencePipeline(PipelineConfig(max_candidates=4, **PASS_ALL)).run(QUERY, passages=PASSAGES)
    assert len(_candidates(ok)) == 4
    with pytest.raises(InputError) as err:
        EvidencePipeline(PipelineConfig(max_candidates=3)).run(QUERY, passages=PASSAGES)
    assert str(err.value) == "4 passages, over max_candidates=3; raise the limit or pre-filter"


def test_a_passage_of_exactly_max_chunk_chars_is_accepted_and_one_character_more_is_refused():
    """``max_chunk_chars`` is the longest passage a run takes; the error names the first longer one."""
    passages = ["terminate " * 3, "x" * 30]  # 30 characters each
    ok = EvidencePipeline(PipelineConfig(max_chunk_chars=30, **PASS_ALL)).run("terminate", passages=passages)
    assert [c.text for c in _candidates(ok)] == passages
    with pytest.raises(InputError) as err:
        EvidencePipeline(PipelineConfig(max_chunk_chars=29)).run("terminate", passages=passages)
    assert str(err.value) == "passage 0 has 30 characters, over max_chunk_chars=29"


def test_without_passages_or_an_index_the_error_says_what_to_pass():
    with pytest.raises(InputError) as err:
        EvidencePipeline(PipelineConfig()).run(QUERY)
    assert str(err.value) == "no candidates: pass passages=… or build the pipeline with an index"


def test_the_candidates_phase_records_its_source_and_scoring_and_no_k_init_for_passages():
    result = EvidencePipeline(PipelineConfig(scoring="lexical", **PASS_ALL)).run(QUERY, passages=PASSAGES)
    phase = result.trace.phase("candidates")
    assert phase.summary == "4 candidates from passages (lexical scores)"
    assert phase.details == {"source": "passages", "k_init": None, "scoring": "lexical"}


def test_an_empty_passage_list_gives_an_empty_context_and_embeds_only_the_query(table_encoder):
    encoder = table_encoder({QUERY: [1.0, 0.0]})
    result = EvidencePipeline(PipelineConfig(), encoder=encoder).run(QUERY, passages=[])
    assert result.passages == [] and result.tokens == 0
    assert result.trace.phase("candidates").summary == "0 candidates from passages (hybrid scores)"
    assert encoder.calls == [[QUERY]]


# -- the scores of each candidate ------------------------------------------------------------------


def test_the_dense_score_is_the_cosine_of_unnormalised_embeddings(table_encoder):
    """Neither the query's nor the passages' vectors need unit length; a zero vector scores 0."""
    vectors = {QUERY: [0.3, 0.4, 1.2], "a": [2.0, 0.1, 0.7], "b": [0.0, 0.0, 0.0], "c": [-0.5, 3.0, 0.2]}
    encoder = table_encoder(vectors)
    result = EvidencePipeline(PipelineConfig(scoring="dense", **PASS_ALL), encoder=encoder).run(
        QUERY, passages=["a", "b", "c"])
    query = np.asarray(vectors[QUERY], dtype=np.float32).astype(np.float64)
    for record in _candidates(result):
        row = np.asarray(vectors[record.text], dtype=np.float32).astype(np.float64)
        norm = np.linalg.norm(row)
        expected = 0.0 if norm == 0 else float(row @ query / norm / np.linalg.norm(query))
        assert record.dense_score == pytest.approx(expected, rel=1e-6, abs=1e-15)
        assert record.retrieval_score == record.dense_score  # dense scoring: the cosine ranks
    assert [r.dense_score for r in _candidates(result)][1] == 0.0


def test_a_nearly_orthogonal_passage_gets_an_accurate_small_cosine(table_encoder):
    """Cosines are summed in float64: large components that almost cancel leave the right
    small score (summed in float32 it would be off in the fourth digit)."""
    encoder = table_encoder({QUERY: [1.0, 1.0], "wide": [10000.0, -9999.0]})
    result = EvidencePipeline(PipelineConfig(scoring="dense", **PASS_ALL), encoder=encoder).run(
        QUERY, passages=["wide"])
    expected = 1.0 / (np.sqrt(2.0) * np.hypot(10000.0, 9999.0))
    assert _candidates(result)[0].dense_score == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("scoring", "weight"), [("hybrid", 0.25), ("hybrid", 1.0), ("lexical", 1.0)])
def test_the_retrieval_score_fuses_the_recorded_dense_and_lexical_parts(scoring, weight):
    result = EvidencePipeline(PipelineConfig(scoring=scoring, lexical_weight=weight, **PASS_ALL)).run(
        QUERY, passages=MORE)
    records = _candidates(result)
    assert 0 < sum(r.lexical_score > 0 for r in records) < len(records)
    dense = np.array([[r.dense_score for r in records]])
    lexical = np.array([[r.lexical_score for r in records]])
    expected = fuse_scores(dense, lexical, scoring=scoring, lexical_weight=weight)[0]
    assert [r.retrieval_score for r in records] == pytest.approx(expected.tolist(), abs=1e-9)
    assert [r.retrieval_score for r in records] != pytest.approx([r.dense_score for r in records], abs=1e-3)


def test_one_lexically_scored_passage_is_ranked_by_its_standardised_bm25_not_its_cosine():
    result = EvidencePipeline(PipelineConfig(scoring="lexical", **PASS_ALL)).run(QUERY, passages=PASSAGES[:1])
    (record,) = _candidates(result)
    assert record.dense_score > 0.3
    assert record.retrieval_score == 0.0  # one score standardises to 0


# -- an index ---------------------------------------------------------------------------------------


def test_an_index_from_another_encoder_is_refused_naming_both_encoders_and_the_fix():
    index = InMemoryIndex(PASSAGES, HashingEncoder(n_features=64))
    with pytest.raises(LocalIndexError) as err:
        EvidencePipeline(PipelineConfig(), encoder=HashingEncoder(n_features=128), index=index)
    assert str(err.value) == ("the index was built with encoder 'hashing:64', not 'hashing:128'; "
                              "give the 'encoder' that built it or rebuild the index")


@pytest.mark.parametrize(("scoring", "source"), [("dense", "knn"), ("hybrid", "knn+bm25")])
def test_index_candidates_carry_the_index_labels_and_the_phase_records_k_init(scoring, source):
    encoder = HashingEncoder()
    labels = [f"clause-{i}" for i in range(len(PASSAGES))]
    index = InMemoryIndex(PASSAGES, encoder, labels=labels)
    config = PipelineConfig(k_init=2, scoring=scoring, use_ecse=False, **PASS_ALL)
    result = EvidencePipeline(config, encoder=encoder, index=index).run(QUERY)
    phase = result.trace.phase("candidates")
    assert phase.details == {"source": source, "k_init": 2, "scoring": scoring}
    assert phase.summary == f"2 candidates from {source} ({scoring} scores)"
    records = _candidates(result)
    assert [r.chunk_id for r in records] == [labels[i] for i in result.ids]
    assert result.trace.phase("verify").details["accepted"] == [r.chunk_id for r in records]
    assert [d["id"] for d in result.documents] == [r.chunk_id for r in records]


def test_an_index_search_that_finds_nothing_gives_an_empty_context(table_encoder):
    """kNN and BM25 both limited to no chunk: no candidate, no error, an empty context."""
    encoder = table_encoder({QUERY: [1.0, 0.0], **{p: [1.0, 0.0] for p in PASSAGES}})
    index = InMemoryIndex(PASSAGES, encoder, knn_scope=[], bm25_scope=[])
    result = EvidencePipeline(PipelineConfig(k_init=3), encoder=encoder, index=index).run(QUERY)
    assert result.trace.phase("candidates").summary == "0 candidates from knn+bm25 (hybrid scores)"
    assert result.passages == [] and _candidates(result) == []


def test_after_an_empty_knn_the_fallback_judges_its_index_hits_by_their_own_vectors(table_encoder):
    """kNN finds nothing; BM25 over the index brings chunks whose cosine to the query passes."""
    fillers = [f"Rivers flood in season {i}." for i in range(4)]
    vectors = {QUERY: [1.0, 0.0], PASSAGES[0]: [1.0, 0.0], PASSAGES[3]: [0.9, 0.1],
               PASSAGES[1]: [0.0, 1.0], PASSAGES[2]: [0.0, 1.0], **{f: [0.0, 1.0] for f in fillers}}
    encoder = table_encoder(vectors)
    index = InMemoryIndex(PASSAGES + fillers, encoder, knn_scope=[])
    config = PipelineConfig(k_init=2, scoring="dense", rationales="query", verification="cosine", tau_relevance=0.5,
                            n_min=3, theta_redundancy=None, t_max=None)
    result = EvidencePipeline(config, encoder=encoder, index=index).run(QUERY)
    assert result.trace.phase("candidates").summary == "0 candidates from knn (dense scores)"
    fallback = result.trace.phase("fallback").details
    # 0 and 3 share "may terminate" and pass; 2 shares only "agreement", not the meaning, and is refused
    assert sorted(fallback["added"]) == [0, 3] and fallback["refused"] == [2]
    assert sorted(result.ids) == [0, 3]


def test_with_an_empty_passage_list_the_fallback_fills_from_the_index_judging_each_hit_by_its_vector(
        table_encoder):
    """The caller's (empty) passages are the candidates; the BM25 fallback still searches the index."""
    fillers = [f"Rivers flood in season {i}." for i in range(4)]
    vectors = {QUERY: [1.0, 0.0], PASSAGES[0]: [1.0, 0.0], PASSAGES[3]: [0.9, 0.1],
               PASSAGES[1]: [0.0, 1.0], PASSAGES[2]: [0.0, 1.0], **{f: [0.0, 1.0] for f in fillers}}
    encoder = table_encoder(vectors)
    index = InMemoryIndex(PASSAGES + fillers, encoder)
    config = PipelineConfig(verification="cosine", tau_relevance=0.5, n_min=1, theta_redundancy=None, t_max=None)
    result = EvidencePipeline(config, encoder=encoder, index=index).run(QUERY, passages=[])
    assert result.trace.phase("candidates").summary == "0 candidates from passages (hybrid scores)"
    assert result.trace.phase("fallback").details["scope"] == "index"
    assert result.ids == [0] and result.trace.phase("fallback").details["added"] == [0]


# -- second-hop retrieval: each rule-written rationale fetches its own candidates --------------------

COMPARISON = "Which was founded first, Acme Widgets or Borealis Shipping?"
PART_A, PART_B = "Acme Widgets founded first", "Borealis Shipping founded first"  # the rule-written parts
FIRMS = [
    "The weather was mild that spring.",               # kNN's best for the question
    "Acme Widgets opened its first works in 1901.",    # kNN's best for part A
    "Borealis Shipping began trading in 1950.",        # kNN's best for part B
    "Borealis Shipping founded first founded first",   # BM25's best for part B, a vector near nothing
    "Rivers flood in the autumn.",
]
FIRM_VECTORS = {COMPARISON: [1, 0, 0, 0, 0], PART_A: [0, 1, 0, 0, 0], PART_B: [0, 0, 1, 0, 0],
                FIRMS[0]: [1, 0, 0, 0, 0], FIRMS[1]: [0.1, 1, 0, 0, 0], FIRMS[2]: [0.2, 0, 1, 0, 0],
                FIRMS[3]: [0, 0, 0, 1, 0], FIRMS[4]: [0, 0, 0, 0, 1]}


def _comparison_run(table_encoder, scoring, wrap=lambda index: index):
    encoder = table_encoder(FIRM_VECTORS)
    index = InMemoryIndex(FIRMS, encoder, labels=[f"doc-{i}" for i in range(len(FIRMS))])
    config = PipelineConfig(k_init=1, scoring=scoring, expansion_window=0, **PASS_ALL)
    return EvidencePipeline(config, encoder=encoder, index=wrap(index)).run(COMPARISON)


def test_with_dense_scoring_each_part_retrieves_its_knn_best_only(table_encoder):
    result = _comparison_run(table_encoder, "dense")
    fetched = {r.chunk_id: r.retrieved_for for r in _candidates(result)}
    assert fetched == {"doc-0": None, "doc-1": "rationale 1 (part)", "doc-2": "rationale 2 (part)"}
    assert result.ids == [1, 2]
    assert [d["id"] for d in result.documents] == ["doc-1", "doc-2"]
    assert [d["text"] for d in result.documents] == result.passages == [FIRMS[1], FIRMS[2]]


def test_with_hybrid_scoring_each_part_retrieves_its_knn_and_its_bm25_best(table_encoder):
    result = _comparison_run(table_encoder, "hybrid")
    fetched = {r.chunk_id: r.retrieved_for for r in _candidates(result)}
    assert fetched == {"doc-0": None, "doc-1": "rationale 1 (part)", "doc-2": "rationale 2 (part)",
                       "doc-3": "rationale 2 (part)"}
    # stemmed, part B ("borealis shipping founded first") finds doc-2 in both halves; doc-3 only lexically
    assert result.ids == [1, 2]


def test_records_without_an_id_are_labelled_by_their_chunk_id(table_encoder):
    result = _comparison_run(table_encoder, "hybrid", WithoutIds)
    fetched = {r.chunk_id: r.retrieved_for for r in _candidates(result)}
    assert fetched == {0: None, 1: "rationale 1 (part)", 2: "rationale 2 (part)", 3: "rationale 2 (part)"}


@pytest.mark.parametrize("scoring", ["dense", "hybrid"])
def test_a_retrieved_candidate_records_its_own_cosine_to_the_query(table_encoder, scoring):
    result = _comparison_run(table_encoder, scoring)
    query = np.asarray(FIRM_VECTORS[COMPARISON], dtype=np.float64)
    for record in _candidates(result):
        row = np.asarray(FIRM_VECTORS[record.text], dtype=np.float64)
        assert record.dense_score == pytest.approx(float(row @ query / np.linalg.norm(row)), abs=1e-6)
        assert (record.retrieval_score is None) == (record.retrieved_for is not None)


def test_the_question_itself_retrieves_nothing_beyond_the_candidates_phase(table_encoder):
    """A plain question's rationale is the question: its kNN and BM25 ran in the candidates phase,
    where the fused ranking kept ``k_init``; a chunk cut there does not come back through it."""
    query = "when did the river flood"
    texts = ["A calm note about nothing in particular.", "The river did flood when the rains came, the river flood.",
             *(f"Filler sentence number {i}." for i in range(4))]
    encoder = table_encoder({query: [1.0, 0.0], texts[0]: [1.0, 0.0], **{t: [0.0, 1.0] for t in texts[1:]}})
    index = InMemoryIndex(texts, encoder)
    assert index.bm25_search(query, 1)[0].tolist() == [1]  # BM25's best, cut by the fused ranking below
    config = PipelineConfig(k_init=1, scoring="hybrid", **PASS_ALL)
    result = EvidencePipeline(config, encoder=encoder, index=index).run(query)
    assert result.trace.phase("selection").details["rationales"][0]["label"] == "question"
    assert [r.chunk_id for r in _candidates(result)] == [0]
    assert all(r.retrieved_for is None for r in _candidates(result))


# -- the BM25 fallback's pool -------------------------------------------------------------------------


def _judge_only(*allowed):
    def verifier(request):
        return {"relevant": request.chunk in allowed, "flagged": False, "reason": "", "flag_types": []}
    return verifier


def test_the_fallback_over_the_candidates_looks_past_the_chunks_verification_refused(table_encoder):
    """ECSE keeps the three passages nearest the query; the verifier refuses them. BM25 ranks
    those three first; the fallback still reaches the fourth, which the verifier accepts."""
    passages = ["terminate agreement party may", "party may terminate agreement now",
                "terminate the agreement, either party may", "the agreement is signed", "unrelated text"]
    vectors = {QUERY: [1.0, 0.0], passages[0]: [1.0, 0.0], passages[1]: [1.0, 0.02], passages[2]: [1.0, 0.01],
               passages[3]: [0.0, 1.0], passages[4]: [0.0, 1.0]}
    encoder = table_encoder(vectors)
    config = PipelineConfig(scoring="dense", rationales="query", expansion_window=0, n_min=1,
                            theta_redundancy=None, t_max=None)
    pipe = EvidencePipeline(config, encoder=encoder, verifier=_judge_only(passages[3]))
    result = pipe.run(QUERY, passages=passages)
    assert result.trace.phase("selection").summary.startswith("ECSE kept 3 of 5")
    fallback = result.trace.phase("fallback")
    assert fallback.details["scope"] == "candidates"
    assert fallback.details["added"] == [3]
    assert fallback.summary == ("fired (0 accepted < n_min 1); BM25 over the candidates: "
                                "1 added, 0 refused by verification")
    assert result.ids == [3]


@pytest.mark.parametrize("wrap", [lambda index: index, WithoutIds], ids=["records-with-ids", "records-without-ids"])
def test_the_fallback_over_an_index_looks_past_the_chunks_verification_refused(table_encoder, wrap):
    passages = ["terminate agreement party may", "party may terminate agreement now",
                "terminate the agreement, either party may", "the agreement is signed", "unrelated text"]
    vectors = {QUERY: [1.0, 0.0], **{p: [1.0, 0.0] for p in passages[:3]}, passages[3]: [0.0, 1.0],
               passages[4]: [0.0, 1.0]}
    encoder = table_encoder(vectors)
    index = wrap(InMemoryIndex(passages, encoder))
    config = PipelineConfig(k_init=3, scoring="dense", rationales="query", use_ecse=False, n_min=1,
                            theta_redundancy=None, t_max=None)
    pipe = EvidencePipeline(config, encoder=encoder, index=index, verifier=_judge_only(passages[3]))
    result = pipe.run(QUERY)
    assert result.trace.phase("verify").details["accepted"] == []
    fallback = result.trace.phase("fallback").details
    assert fallback["scope"] == "index" and fallback["added"] == [3]
    assert result.ids == [3]
