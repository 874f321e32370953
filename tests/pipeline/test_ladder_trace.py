"""The verification ladder rung by rung: which rung "auto" picks, what each rung reports per
judged chunk (rung name, passed, score, verdicts), the threshold edge, when the LLM rung
batches, and the errors a bad request or a bad cross-encoder gives."""

from __future__ import annotations

import json

import numpy as np
import pytest

from meteora_edge.errors import ConfigError, ModelError
from meteora_edge.pipeline.ladder import choose_rung, run_ladder
from meteora_edge.selection.rationales import Rationale

TEXTS = ["alpha", "beta", "gamma"]
RATIONALES = (Rationale("find alpha", 1, "Alpha", ""),)


def ladder(rung, order=(0, 1, 2), **kwargs):
    """run_ladder with 2-d vectors: the query is the x axis; chunk 0 on it, 1 at cos 0.6, 2 orthogonal."""
    args = dict(query="which alpha?", texts=TEXTS, order=list(order), rationales=RATIONALES, tau=0.6,
                query_vector=np.array([1.0, 0.0]), vectors=np.array([[2.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    args.update(kwargs)
    return run_ladder(rung, **args)


# -- choosing the rung -----------------------------------------------------------------------


def test_auto_without_models_is_the_cosine_rung_unless_the_llm_rerank_judged_already():
    assert choose_rung("auto", verifier=None, cross_encoder=None) == "cosine"
    assert choose_rung("auto", verifier=None, cross_encoder=None, reranked=True) == "none"
    assert choose_rung("auto", verifier=None, cross_encoder=object()) == "cross-encoder"
    assert choose_rung("auto", verifier=object(), cross_encoder=object(), reranked=True) == "llm"


def test_an_unknown_rung_is_refused_with_the_list_of_rungs():
    with pytest.raises(ConfigError) as error:
        choose_rung("bm25", verifier=None, cross_encoder=None)
    assert str(error.value) == "verification must be one of auto, llm, cross-encoder, cosine, none, got 'bm25'"


def test_a_requested_rung_needs_its_model():
    with pytest.raises(ConfigError) as llm:
        choose_rung("llm", verifier=None, cross_encoder=object())
    assert str(llm.value) == "verification 'llm' needs a verifier; add an llm to the bundle or pass verifier=…"
    with pytest.raises(ConfigError) as cross:
        choose_rung("cross-encoder", verifier=object(), cross_encoder=None)
    assert str(cross.value) == "verification 'cross-encoder' needs a cross-encoder; export one into the bundle"


@pytest.mark.parametrize("rung", ["llm", "cross-encoder", "cosine", "none"])
def test_a_requested_rung_with_its_model_is_kept(rung):
    assert choose_rung(rung, verifier=object(), cross_encoder=object()) == rung


# -- what each rung reports ------------------------------------------------------------------


@pytest.mark.parametrize("rung", ["llm", "cross-encoder", "cosine", "none"])
def test_nothing_to_judge_still_names_the_rung(rung):
    outcome = ladder(rung, order=[])
    assert (outcome.rung, outcome.passed, outcome.scores, outcome.verdicts) == (rung, [], [], [])


def test_the_none_rung_passes_every_chunk_without_a_score():
    outcome = ladder("none", order=[2, 0])
    assert (outcome.rung, outcome.passed, outcome.scores, outcome.verdicts) == ("none", [True, True], [None, None], [])


def test_the_cosine_rung_scores_in_judging_order_and_a_score_equal_to_tau_passes():
    outcome = ladder("cosine", order=[2, 1, 0])
    assert outcome.rung == "cosine"
    assert outcome.scores == [0.0, 0.6, 1.0]
    assert outcome.passed == [False, True, True]


def test_the_cosine_rung_takes_the_best_of_query_and_rationales():
    outcome = ladder("cosine", rationale_vectors=np.array([[0.0, 5.0]]))
    assert outcome.scores == [1.0, 0.8, 1.0] and outcome.passed == [True, True, True]
    without = ladder("cosine", rationale_vectors=np.zeros((0, 2)))
    assert without.scores == [1.0, 0.6, 0.0]


class WordCrossEncoder:
    """Scores a passage 1.0 when it shares a word with the query, else 0.25; records the calls."""

    def __init__(self):
        self.calls = []

    def score(self, query, passages):
        self.calls.append((query, list(passages)))
        words = set(query.rstrip("?").split())
        return [1.0 if words & set(p.split()) else 0.25 for p in passages]


def test_the_cross_encoder_rung_scores_query_and_passages_in_judging_order():
    encoder = WordCrossEncoder()
    outcome = ladder("cross-encoder", order=[1, 0], cross_encoder=encoder)
    assert encoder.calls == [("which alpha?", ["beta", "alpha"])]
    assert (outcome.rung, outcome.passed, outcome.scores) == ("cross-encoder", [False, True], [0.25, 1.0])


def test_a_cross_encoder_score_equal_to_tau_passes():
    outcome = ladder("cross-encoder", order=[0, 1], tau=0.25, cross_encoder=WordCrossEncoder())
    assert outcome.passed == [True, True]


class FixedCrossEncoder:
    def __init__(self, scores):
        self.scores = scores

    def score(self, query, passages):
        return self.scores


def test_a_row_or_column_of_scores_reads_as_one_score_per_passage():
    for scores in (np.array([[0.9, 0.1]]), np.array([[0.9], [0.1]])):
        assert ladder("cross-encoder", order=[0, 1], cross_encoder=FixedCrossEncoder(scores)).scores == [0.9, 0.1]


@pytest.mark.parametrize("scores", [[0.9, 0.1, 0.5], [[0.9], [0.1], [0.5]]], ids=["flat", "column"])
def test_a_wrong_number_of_cross_encoder_scores_is_a_model_error_naming_both_counts(scores):
    with pytest.raises(ModelError) as error:
        ladder("cross-encoder", order=[0, 1], cross_encoder=FixedCrossEncoder(scores))
    assert str(error.value) == "cross-encoder returned 3 scores for 2 passages, or non-finite values"


@pytest.mark.parametrize("scores", [[0.9, float("nan")], [0.9, None], [float("inf"), 0.1]], ids=["nan", "none", "inf"])
def test_a_missing_or_non_finite_cross_encoder_score_is_a_model_error(scores):
    with pytest.raises(ModelError, match=r"^cross-encoder returned 2 scores for 2 passages, or non-finite values$"):
        ladder("cross-encoder", order=[0, 1], cross_encoder=FixedCrossEncoder(scores))


# -- the LLM rung: one chunk at a time or in batches -------------------------------------------


class BothWays:
    """A verifier that can judge one chunk or a batch; accepts chunks with an 'a' in them."""

    def __init__(self):
        self.single: list[int] = []
        self.batches: list[list[int]] = []

    def verify(self, request):
        self.single.append(request.chunk_index)
        return {"relevant": "a" in request.chunk, "flagged": False}

    def verify_batch(self, requests):
        self.batches.append([r.chunk_index for r in requests])
        return json.dumps([{"id": r.chunk_index, "relevant": "a" in r.chunk, "flagged": False} for r in requests])


@pytest.mark.parametrize("batch_size, single, batches", [
    (None, [1, 2, 0], []),      # the default judges one chunk at a time
    (1, [1, 2, 0], []),
    (2, [], [[1, 2], [0]]),
    (3, [], [[1, 2, 0]]),
])
def test_a_batch_verifier_batches_only_when_the_batch_size_is_above_one(batch_size, single, batches):
    verifier = BothWays()
    extra = {} if batch_size is None else {"batch_size": batch_size}
    outcome = ladder("llm", order=[1, 2, 0], verifier=verifier, texts=["alpha", "beta", "xyz"], **extra)
    assert (verifier.single, verifier.batches) == (single, batches)
    assert outcome.rung == "llm" and outcome.passed == [True, False, True] and outcome.scores == [None, None, None]
    assert [v.chunk_index for v in outcome.verdicts] == [1, 2, 0]
