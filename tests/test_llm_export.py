"""Export round trip: a tiny random Llama made here → GGUF F16 → Q8_0 / Q4_K_M → runtime → verdict.

The converter comes from the llama-cpp-python sdist, fetched once per session with pip (PyPI).
A random model writes junk, so the assertion is that the schema-constrained answer still
parses into a valid verdict.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge import LlamaVerifier, LocalLLM, Rationale
from meteora_edge.bundle import Bundle
from meteora_edge.cli.main import main
from meteora_edge.llm_file import read_gguf_metadata
from meteora_edge.verification import VerificationRequest

pytestmark = pytest.mark.slow
WORDS = ("the a party may terminate agreement notice days written fees due monthly tenant landlord deposit "
         "return confidential information renewal term year evidence passage query judge relevant flagged").split()


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer LlamaForCausalLM (hidden 256, so k-quants apply) with a sentencepiece BPE vocabulary."""
    spm = pytest.importorskip("sentencepiece")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tiny-llama")
    rng = random.Random(0)
    corpus = out / "corpus.txt"
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))) + "." for _ in range(400)]
    corpus.write_text("\n".join(lines) + '\n{"relevant": true, "flagged": false, "reason": "x"} 0123456789\n')
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(out / "sp"), vocab_size=400, model_type="bpe", character_coverage=1.0,
        byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2,
    )
    tokenizer = transformers.LlamaTokenizer(vocab_file=str(out / "sp.model"), legacy=False)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
    )
    model_dir = out / "model"
    transformers.LlamaForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return model_dir


@pytest.fixture(scope="session")
def converter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from meteora_edge.export.llm import fetch_converter

    dest = tmp_path_factory.mktemp("llama-cpp") / "convert"
    path = fetch_converter(dest)
    assert fetch_converter(dest) == path  # second call reuses the extraction
    return path


def _judge(bundle: Path) -> None:
    llm = LocalLLM.from_bundle(bundle, threads=1)
    assert llm.chat_format == "plain" and llm.context_size == 2048
    verifier = LlamaVerifier(llm, reason_max_chars=40)
    for i, chunk in enumerate(["Either party may terminate on notice.", "Fees are due monthly."]):
        verdict = verifier.judge(VerificationRequest("who may terminate?", chunk, i, (Rationale("termination", 1),), ()))
        assert not verdict.parse_error, verifier.last_completion
        assert isinstance(verdict.relevant, bool) and isinstance(verdict.flagged, bool)


@pytest.mark.parametrize("quant", ["F16", "Q8_0", "Q4_K_M"])
def test_tiny_llama_round_trip(tiny_llama, converter, tmp_path, quant):
    pytest.importorskip("llama_cpp")
    from meteora_edge.export.llm import export_llm

    bundle = tmp_path / "bundle"
    component = export_llm(str(tiny_llama), bundle, quant=quant, llama_cpp_dir=converter)
    assert component.settings["quant"] == quant and component.settings["context_size"] == 2048
    entry = component.files["model"]
    assert read_gguf_metadata(bundle / entry.path)["general.architecture"] == "llama"
    assert Bundle.load(bundle).verify() == {"llm": {"model": "ok"}}
    assert not [p for p in bundle.rglob("*") if p.name.startswith(".")]  # no temporary leftovers
    _judge(bundle)


def test_cli_export_llm_converts_and_quantises(tiny_llama, converter, tmp_path):
    pytest.importorskip("llama_cpp")
    bundle = tmp_path / "bundle"
    result = CliRunner().invoke(main, ["export", "llm", str(tiny_llama), "--out", str(bundle), "--quant", "Q8_0",
                                       "--llama-cpp", str(converter)])
    assert result.exit_code == 0, result.output
    assert "llm llm/model.Q8_0.gguf (Q8_0" in result.output
    _judge(bundle)
