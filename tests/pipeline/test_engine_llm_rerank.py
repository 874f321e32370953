"""The LLM rerank inside the pipeline: its pool bookkeeping in the trace.

On test_llm_rerank's question and five passages, ECSE (hashing encoder, ``pooled_z=0.5``)
keeps chunks 2 and 0; the pool of four is that selection and the next best, ``[2, 0, 3, 1]``.
The scorer likes chunk 1 and dislikes chunk 2, so the rerank keeps ``[0, 1]``: it drops a
chunk ECSE had kept and brings in one ECSE had not. Each pooled chunk records the scorer's score; the kept ones' priority is the
combined score ``z(ecse) + weight · z(llm)`` over the pool. The scenario was set with the
``unicode-words`` analyser (no stemming, no stop words), which the runs here keep.
"""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge.errors import InputError, ModelError
from meteora_edge.models.analyzer import UNICODE_WORDS
from meteora_edge.pipeline.engine import EvidencePipeline, PipelineConfig
from meteora_edge.pipeline.rerank import combined_scores
from test_llm_rerank import PASSAGES, QUESTION  # the film question and its five passages

LIKES = {1: 4.0, 2: -5.0}  # the scorer's opinion by passage; 0 for the others


def _config(**settings) -> PipelineConfig:
    return PipelineConfig(**{"verification": "none", "n_min": None, "theta_redundancy": None, "t_max": None,
                             "llm_pool": 4, "pooled_z": 0.5, **settings})


class TableScorer:
    """Scores each passage from ``LIKES``; ``shape`` reshapes the answer (e.g. a column)."""

    def __init__(self, shape=None, values=None):
        self.shape, self.values, self.calls = shape, values, []

    def score(self, query, passages):
        self.calls.append(list(passages))
        if self.values is not None:
            return self.values
        scores = np.array([LIKES.get(PASSAGES.index(p), 0.0) for p in passages])
        return scores.reshape(self.shape) if self.shape else scores


def _run(scorer, **settings):
    return EvidencePipeline(_config(**settings), relevance_scorer=scorer, analyzer=UNICODE_WORDS).run(
        QUESTION, passages=PASSAGES)


def test_ecse_alone_keeps_chunks_2_and_0():
    """The scenario's premise: without the rerank ECSE keeps 2 and 0, scored by selection."""
    result = _run(None)
    assert result.ids == [2, 0] and result.score_names == ["selection", "selection"]
    assert [c.selected for c in result.trace.candidates] == [True, False, True, False, False]
    assert [c.chosen_by for c in result.trace.candidates] == ["pooled cut", None, "pooled cut", None, None]


def test_the_rerank_records_its_pool_its_cut_and_its_settings():
    result = _run(TableScorer(), llm_weight=1.5, llm_z=0.5)
    selection = result.trace.phase("selection")
    assert selection.details["llm_rerank"] == {"pool": [2, 0, 3, 1], "kept": [0, 1], "weight": 1.5, "z": 0.5,
                                               "rules": [], "rules_applied": False}
    assert selection.summary.endswith("; LLM rerank of 4 kept 2")
    assert result.ids == [0, 1]


def test_selected_marks_what_the_rerank_kept_even_against_ecse():
    """Chunk 2 (ECSE's best, the scorer's worst) is no longer selected; chunk 1 (not ECSE's) is."""
    records = _run(TableScorer()).trace.candidates
    assert [c.selected for c in records] == [True, True, False, False, False]
    assert [c.chosen_by for c in records] == ["llm rerank", "llm rerank", None, None, None]  # the cut, not ECSE
    assert [c.llm_score for c in records] == [0.0, 4.0, -5.0, 0.0, None]  # chunk 4 was not pooled


def test_the_kept_chunks_priority_is_the_combined_score_over_the_pool():
    result = _run(TableScorer(), llm_weight=1.5)
    records = result.trace.candidates
    pool = result.trace.phase("selection").details["llm_rerank"]["pool"]
    combined = combined_scores(np.array([records[p].ecse_score for p in pool]),
                               np.array([records[p].llm_score for p in pool]), weight=1.5)
    expected = {p: float(c) for p, c in zip(pool, combined)}
    assert result.score_names == ["llm-rerank", "llm-rerank"]
    assert result.scores == pytest.approx([expected[0], expected[1]], abs=1e-12)
    assert all(np.isfinite(result.scores)) and result.scores[0] > result.scores[1]


def test_a_column_of_scores_counts_as_one_score_per_passage():
    """A scorer may answer an (n, 1) array; the rerank reads it as the n scores."""
    flat, column = _run(TableScorer()), _run(TableScorer(shape=(-1, 1)))
    assert column.ids == flat.ids == [0, 1] and column.scores == flat.scores
    assert column.trace.phase("selection").details["llm_rerank"] == flat.trace.phase("selection").details["llm_rerank"]
    assert [c.llm_score for c in column.trace.candidates] == [0.0, 4.0, -5.0, 0.0, None]


def test_a_missing_score_is_a_model_error():
    """A scorer answering None for a passage gave no number: the run stops with the scorer's fault."""
    with pytest.raises(ModelError, match="relevance scorer returned 4 scores for 4 passages, or non-finite values"):
        _run(TableScorer(values=[1.0, None, 0.0, 2.0]))



class RuleScorer(TableScorer):
    """Reads rejection rules: a passage holding a word a rule names scores as the scorer's worst."""

    reads_rules = True

    def score(self, query, passages, rules=()):
        self.rules = list(rules)
        scores = np.asarray(super().score(query, passages), dtype=float)
        banned = {w for r in rules for w in r.split()}
        return np.array([-9.0 if banned & set(p.rstrip(".").split()) else s for p, s in zip(passages, scores)])


def test_rejection_rules_reach_the_scorer_and_push_a_matching_chunk_out():
    """Without a rule the rerank keeps 0 and 1; the user's rule naming "Protocol" drops chunk 1."""
    scorer = RuleScorer()
    result = EvidencePipeline(_config(), relevance_scorer=scorer, analyzer=UNICODE_WORDS).run(
        QUESTION, passages=PASSAGES, reject=["  passages   about Protocol "])
    assert scorer.rules == ["passages about Protocol"]
    rerank = result.trace.phase("selection").details["llm_rerank"]
    assert rerank["rules"] == ["passages about Protocol"] and rerank["rules_applied"] is True
    assert 1 not in result.ids and result.ids[0] == 0
    assert result.trace.phase("selection").details["rationales"][0]["flag_instructions"] == "passages about Protocol"


def test_a_rationale_s_flag_instructions_are_rules_too_and_a_scorer_without_rules_is_recorded_as_such():
    given = [{"text": QUESTION, "flag_instructions": "passages about Protocol"},
             {"text": "the schedule", "flag_instructions": "superseded terms"}]
    scorer = RuleScorer()
    result = EvidencePipeline(_config(), relevance_scorer=scorer, analyzer=UNICODE_WORDS).run(
        QUESTION, passages=PASSAGES, rationales=given, reject=["passages about Protocol", "drafts"])
    # each rule once and apart, the rationales' first; the verifier reads the user's merged into the first rationale
    assert scorer.rules == ["passages about Protocol", "superseded terms", "drafts"]
    rationales = result.trace.phase("selection").details["rationales"]
    assert [r["flag_instructions"] for r in rationales] == ["passages about Protocol; drafts", "superseded terms"]
    plain = EvidencePipeline(_config(), relevance_scorer=TableScorer(), analyzer=UNICODE_WORDS).run(
        QUESTION, passages=PASSAGES, reject=["drafts"])
    rerank = plain.trace.phase("selection").details["llm_rerank"]
    assert rerank["rules"] == ["drafts"] and rerank["rules_applied"] is False  # TableScorer.score takes no rules


@pytest.mark.parametrize("reject", ["drafts", [""], [3], 5, None])
def test_rejection_rules_must_be_a_list_of_words(reject):
    with pytest.raises(InputError, match="reject must be a list of non-empty strings"):
        EvidencePipeline(_config(), analyzer=UNICODE_WORDS).run(QUESTION, passages=PASSAGES, reject=reject)
