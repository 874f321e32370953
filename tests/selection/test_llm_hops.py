"""The decomposing rationale generator (fake model): its own instructions and shots, a small budget, the llm+auto strategy."""

from __future__ import annotations

import pytest
from llm_fakes import FakeLlama

from meteora_edge import HashingEncoder, LocalLLM
from meteora_edge.pipeline.engine import EvidencePipeline, PipelineConfig
from meteora_edge.selection.llm_generator import LlamaRationaleGenerator
from meteora_edge.selection.llm_hops import HopRationaleGenerator, load_hop_shots

pytest.importorskip("llama_cpp")  # chat templates come from llama-cpp-python

ANSWER = ("<rationale_1>[Actress] Kiss and Tell: the actress who played Corliss Archer. Flag Instructions: reject "
          "other films.</rationale_1>\n<rationale_2>[Position] that actress: the government position she held."
          "</rationale_2>")


def test_shipped_hop_shots_decompose_and_come_from_outside_the_dev_data():
    shots = load_hop_shots()
    assert len(shots) == 3 and all(2 <= len(s["rationales"]) <= 3 for s in shots)
    assert any("Flag Instructions:" in r for s in shots for r in s["rationales"])
    assert any(r.startswith("[") and "that " in r for s in shots for r in s["rationales"])  # a later hop points back


def test_hop_prompt_asks_for_steps_and_keeps_the_answer_short():
    fake = FakeLlama([ANSWER, ANSWER])
    generator = HopRationaleGenerator(LocalLLM(fake), sample_shots=load_hop_shots(), max_new_tokens=400)  # the fake counts bytes as tokens
    out = generator.generate("What government position was held by the woman who portrayed Corliss Archer?")
    assert [r.label for r in out] == ["Actress", "Position"] and out[0].flag_instructions == "reject other films."
    text = fake.prompt_text()
    assert "Split the question into its steps" in text and "at most 3 rationale(s)" in text
    assert "The Old Man and the Sea" in text  # the hop shots, not METEORA's general ones
    default = HopRationaleGenerator(LocalLLM(fake), sample_shots=load_hop_shots())
    default.generate("q?")
    assert fake.calls[1]["max_tokens"] == 32 * 3 + 16 < LlamaRationaleGenerator(
        LocalLLM(FakeLlama()), sample_shots=load_hop_shots()).max_new_tokens
    assert isinstance(generator, LlamaRationaleGenerator)  # usable wherever a generator is


def test_llm_and_rule_written_rationales_join_in_ecse():
    passages = ["Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer.",
                "Shirley Temple was named Chief of Protocol of the United States.",
                "Fees are payable monthly.", "The film was directed by Richard Wallace."]
    generator = HopRationaleGenerator(LocalLLM(FakeLlama([ANSWER] * 2)), sample_shots=load_hop_shots(), max_new_tokens=400)
    question = "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?"
    both = EvidencePipeline(PipelineConfig(rationales="llm+auto", verification="none"), encoder=HashingEncoder(),
                            rationale_generator=generator).run(question, passages=passages)
    selection = both.trace.phase("selection")
    assert selection.details["rationale_source"] == "llm+auto"
    labels = [r["label"] for r in selection.details["rationales"]]
    assert labels[0] == "question" and labels[-2:] == ["Actress", "Position"]  # rule-written first, the model's after
    assert selection.details["ecse"]["rationale_strategy"]["extra"] == 2
    only = EvidencePipeline(PipelineConfig(verification="none"), encoder=HashingEncoder(),
                            rationale_generator=generator).run(question, passages=passages)
    assert only.trace.phase("selection").details["rationale_source"] == "generated"  # "auto" keeps the old rule


def test_llm_and_auto_without_any_generated_rationale_keeps_the_rule_written_ones():
    generator = HopRationaleGenerator(LocalLLM(FakeLlama(["I cannot help with that."])), sample_shots=load_hop_shots())
    result = EvidencePipeline(PipelineConfig(rationales="llm+auto", verification="none"), encoder=HashingEncoder(),
                              rationale_generator=generator).run("Who founded Acme Corp?", passages=[
                                  "Acme Corp was founded by Jane Roe.", "Fees are payable monthly."])
    selection = result.trace.phase("selection").details
    assert selection["rationale_source"] == "llm+auto" and [r["label"] for r in selection["rationales"]][0] == "question"
    assert result.passages[0].startswith("Acme Corp")
