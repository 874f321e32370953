"""The LLM rerank: pool and cut arithmetic, the GGUF relevance scorer (fake model), the pipeline phase, eval specs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llm_fakes import FakeLlama

from meteora_edge import HashingEncoder, LocalLLM
from meteora_edge.errors import ConfigError, InputError, ModelError
from meteora_edge.evaluation import build_method
from meteora_edge.pipeline.engine import EvidencePipeline, PipelineConfig
from meteora_edge.pipeline.rerank import combined_scores, rerank_cut, rerank_pool
from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer

# -- arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize("scores, selected, pool, expected", [
    ([0.9, 0.7, 0.2, 0.1], [0], 3, [0, 1, 2]),
    ([0.9, 0.7, 0.2, 0.1], [2, 0], 3, [0, 2, 1]),  # the selection first (best first), then the rest
    ([0.9, 0.7, 0.2, 0.1], [3, 2, 1, 0], 2, [0, 1, 2, 3]),  # never smaller than the selection
    ([0.5, 0.5, 0.5], [], 2, [0, 1]),  # ties by position
])
def test_the_pool_is_the_selection_then_the_next_best(scores, selected, pool, expected):
    assert rerank_pool(scores, selected=selected, pool=pool) == expected


def test_the_cut_adds_standardised_scores_and_keeps_what_stands_out():
    ecse, llm = np.array([3.0, 2.0, 1.0, 0.0]), np.array([0.0, 0.0, 5.0, 0.0])
    combined = combined_scores(ecse, llm, weight=1.0)
    assert combined.argmax() == 2 and math.isclose(combined.mean(), 0.0, abs_tol=1e-12)
    assert rerank_cut(ecse, llm, weight=1.0, z=0.5) == [2, 0]
    assert rerank_cut(ecse, llm, weight=0.0, z=0.5) == [0]  # weight 0: ECSE alone decides (z 1.34, 0.45, …)
    assert rerank_cut(ecse, llm, weight=0.0, z=0.4) == [0, 1]
    assert rerank_cut(ecse, np.ones(4), weight=1.0, z=0.4) == [0, 1]  # a constant LLM adds nothing
    assert rerank_cut(ecse, llm, weight=1.0, z=99.0) == [2]  # never empty
    assert rerank_cut(np.array([]), np.array([]), weight=1.0, z=0.5) == []


# -- the GGUF relevance scorer (fake model) --------------------------------------------------


def _passage_logits(prompt: str) -> dict[str, float]:
    passage = prompt.rsplit("Passage: ", 1)[1]
    return {"Yes": 2.0, "No": -1.0} if "terminate" in passage else {"Yes": -2.0, "No": 1.0}


def test_next_token_logprobs_are_a_log_softmax_over_the_vocabulary():
    llm = LocalLLM(FakeLlama(logits=lambda prompt: {"Y": 3.0, "N": 1.0}))
    yes, no = llm.tokenize("Y")[0], llm.tokenize("N")[0]
    lp_yes, lp_no = llm.next_token_logprobs(llm.tokenize("hello"), (yes, no))
    assert math.isclose(lp_yes - lp_no, 2.0, rel_tol=1e-6) and lp_yes < 0
    total = np.log(np.exp(3.0) + np.exp(1.0) + 510 * np.exp(-10.0))
    assert math.isclose(lp_yes, 3.0 - total, rel_tol=1e-5)


def test_next_token_logprobs_refuse_an_overflow_and_report_model_failures():
    with pytest.raises(ModelError, match="exceeds the model context"):
        LocalLLM(FakeLlama(n_ctx=8, logits=lambda p: {})).next_token_logprobs(list(range(300, 310)), (300,))
    with pytest.raises(ModelError, match="decode failed"):
        LocalLLM(FakeLlama(raises=RuntimeError("decode failed"))).next_token_logprobs([300], (300,))


def test_scorer_gives_the_yes_no_margin_per_passage_with_the_question_first():
    fake = FakeLlama(logits=_passage_logits)
    scorer = LlamaRelevanceScorer(LocalLLM(fake), domain="contract law", ask_first=False)
    scores = scorer.score("Who may terminate?", ["Either party may terminate.", "Fees are monthly.", "  "])
    assert scores.round(6).tolist() == [3.0, -3.0, -3.0]
    first, second = fake.calls[0]["prompt"], fake.calls[1]["prompt"]
    text = fake.prompt_text(0)
    assert "contract law" in text and text.index("Who may terminate?") < text.index("Either party may terminate.")
    assert text.endswith("Answer Yes or No.<|im_end|>\n<|im_start|>assistant\n")
    shared = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
    assert fake.detokenize(first[:shared]).decode().endswith("Passage: ")  # only the passage and after differ
    assert all(call["max_tokens"] == 1 for call in fake.calls)


def test_with_ask_first_the_ask_joins_the_shared_prefix_and_each_passage_costs_only_its_own_tokens():
    fake, after_fake = FakeLlama(logits=_passage_logits), FakeLlama(logits=_passage_logits)
    passages = ["Either party may terminate.", "Fees are monthly."]
    first = LlamaRelevanceScorer(LocalLLM(fake)).score("Who may terminate?", passages)  # the default
    after = LlamaRelevanceScorer(LocalLLM(after_fake), ask_first=False).score("Who may terminate?", passages)
    assert first.round(6).tolist() == after.round(6).tolist() == [3.0, -3.0]  # the fake reads the passage alone
    text = fake.prompt_text(0)
    assert text.index("Who may terminate?") < text.index("Answer Yes or No.") < text.index("Either party")
    assert text.endswith("Either party may terminate.<|im_end|>\n<|im_start|>assistant\n")
    a, b = fake.calls[0]["prompt"], fake.calls[1]["prompt"]
    shared = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    own_first = len(a) - shared
    a2, b2 = after_fake.calls[0]["prompt"], after_fake.calls[1]["prompt"]
    own_after = len(a2) - next(i for i, (x, y) in enumerate(zip(a2, b2)) if x != y)
    assert own_first < own_after  # the ask is no longer evaluated once per passage
    with pytest.raises(ConfigError, match="ask_first must be True or False"):
        LlamaRelevanceScorer(LocalLLM(FakeLlama()), ask_first="yes")


def test_scorer_checks_its_inputs():
    scorer = LlamaRelevanceScorer(LocalLLM(FakeLlama(logits=_passage_logits)), max_passage_chars=12)
    with pytest.raises(InputError, match="non-empty query"):
        scorer.score("  ", ["x"])
    with pytest.raises(ConfigError, match="max_passage_chars"):
        LlamaRelevanceScorer(LocalLLM(FakeLlama()), max_passage_chars=0)
    assert scorer.score("q", ["x" * 50 + " terminate"]).tolist() == [-3.0]  # cut before the word that counts


def test_rejection_rules_join_the_ask_in_the_shared_prefix_and_no_rule_leaves_the_prompt_as_it_was():
    plain_fake, ruled_fake = FakeLlama(logits=_passage_logits), FakeLlama(logits=_passage_logits)
    passages = ["Either party may terminate.", "Fees are monthly."]
    LlamaRelevanceScorer(LocalLLM(plain_fake)).score("Who may terminate?", passages, rules=())
    scorer = LlamaRelevanceScorer(LocalLLM(ruled_fake))
    scorer.score("Who may terminate?", passages, rules=["draft  notes", "superseded terms!"])
    plain, ruled = plain_fake.prompt_text(0), ruled_fake.prompt_text(0)
    assert "rejection rules" not in plain
    assert ("Answer No if the passage matches one of these rejection rules: (1) draft notes. (2) superseded terms! "
            "Answer Yes or No.") in ruled
    assert ruled.index("rejection rules") < ruled.index("Either party")  # in the prefix every passage shares
    assert ruled.replace(" Answer No if the passage matches one of these rejection rules: (1) draft notes. "
                         "(2) superseded terms!", "") == plain
    after = FakeLlama(logits=_passage_logits)
    LlamaRelevanceScorer(LocalLLM(after), ask_first=False).score("Who may terminate?", passages, rules=["drafts"])
    assert after.prompt_text(0).index("Either party") < after.prompt_text(0).index("(1) drafts.")
    for bad in ("drafts", [""], [None], 7):
        with pytest.raises(InputError, match="rules must be a list of non-empty strings"):
            scorer.score("q", ["x"], rules=bad)


# -- in the pipeline -------------------------------------------------------------------------

PASSAGES = [
    "Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer.",
    "Shirley Temple served as Chief of Protocol of the United States.",
    "The film was directed by Richard Wallace.",
    "Corliss Archer is a fictional teenage girl.",
    "Fees are payable monthly.",
]
QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


class KeywordScorer:
    def __init__(self, word: str):
        self.word, self.calls = word, []

    def score(self, query, passages):
        self.calls.append(list(passages))
        return np.array([4.0 if self.word in p else 0.0 for p in passages])


def test_the_rerank_re_cuts_ecse_s_best_candidates_and_records_why():
    config = PipelineConfig(verification="none", n_min=None, theta_redundancy=None, t_max=None, llm_pool=4)
    scorer = KeywordScorer("Chief of Protocol")
    result = EvidencePipeline(config, relevance_scorer=scorer).run(QUESTION, passages=PASSAGES)
    assert len(scorer.calls) == 1 and len(scorer.calls[0]) == 4
    assert result.ids[0] == 1 and result.score_names[0] == "llm-rerank"
    rerank = result.trace.phase("selection").details["llm_rerank"]
    assert len(rerank["pool"]) == 4 and rerank["kept"][0] == 1 and set(rerank["kept"]) <= set(rerank["pool"])
    scored = {c.chunk_id: c.llm_score for c in result.trace.candidates if c.llm_score is not None}
    assert set(scored) == set(rerank["pool"]) and scored[1] == 4.0
    plain = EvidencePipeline(PipelineConfig(verification="none", n_min=None, theta_redundancy=None, t_max=None,
                                            llm_pool=None), relevance_scorer=scorer).run(QUESTION, passages=PASSAGES)
    assert len(scorer.calls) == 1 and "llm_rerank" not in plain.trace.phase("selection").details


def test_a_scorer_that_returns_the_wrong_shape_is_a_model_error():
    class Broken:
        def score(self, query, passages):
            return np.zeros(len(passages) + 1)

    with pytest.raises(ModelError, match="relevance scorer returned"):
        EvidencePipeline(PipelineConfig(verification="none"), relevance_scorer=Broken()).run(QUESTION, passages=PASSAGES)


@pytest.mark.parametrize("kwargs", [{"llm_pool": 0}, {"llm_weight": -1.0}, {"llm_z": "x"}, {"verification_batch": 0},
                                    {"rationales": "llm"}])
def test_bad_rerank_settings(kwargs):
    with pytest.raises(ConfigError):
        PipelineConfig(**kwargs)


# -- eval specs ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, fragment", [
    ("pipeline-llm", "relevance scorer"),
    ("pipeline-llm:rationales=llm+auto", "rationale generator"),
    ("ecse-llm-verify", "verifier"),
    ("ecse-llm-verify:verification_batch=4", "verifier"),
])
def test_llm_methods_name_the_missing_role(spec, fragment):
    with pytest.raises(ConfigError, match=fragment):
        build_method(spec, HashingEncoder())


def test_methods_without_llm_in_their_name_never_use_the_model():
    with pytest.raises(ConfigError, match="pipeline-llm:verification=llm"):
        build_method("pipeline:verification=llm", HashingEncoder())


def test_pipeline_llm_uses_the_scorer_and_the_generator_when_asked():
    from meteora_edge.evaluation import EvalQuestion

    generated = []

    def generator(query):
        generated.append(query)
        return ["[Protocol] Shirley Temple Chief of Protocol"]

    scorer = KeywordScorer("Chief of Protocol")
    question = EvalQuestion("q1", QUESTION, "Chief of Protocol", PASSAGES, frozenset({0, 1}))
    chosen = build_method("pipeline-llm:rationales=llm+auto", HashingEncoder(), generator=generator, scorer=scorer)(question)
    assert 1 in chosen and generated == [QUESTION] and len(scorer.calls) == 1
    build_method("pipeline-llm", HashingEncoder(), generator=generator, scorer=scorer)(question)
    assert generated == [QUESTION]  # without llm+auto the generator is not asked


def test_after_the_llm_rerank_auto_verification_is_none_unless_a_verifier_or_cross_encoder_is_given():
    scorer = KeywordScorer("Chief of Protocol")
    assert EvidencePipeline(PipelineConfig(), relevance_scorer=scorer).rung == "none"  # the model judged the pool
    assert EvidencePipeline(PipelineConfig(llm_pool=None), relevance_scorer=scorer).rung == "cosine"
    assert EvidencePipeline(PipelineConfig()).rung == "cosine"
    assert EvidencePipeline(PipelineConfig(verification="cosine"), relevance_scorer=scorer).rung == "cosine"
    assert EvidencePipeline(PipelineConfig(), relevance_scorer=scorer, verifier=lambda r: "{}").rung == "llm"
