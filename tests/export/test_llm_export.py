"""Export round trip: a tiny random Llama made in the test → GGUF F16 → Q8_0 / Q4_K_M → runtime → verdict.

``tiny_llama`` and ``converter`` are session fixtures in conftest.py; the converter comes from the cache
that scripts/setup-dev.sh fills from the llama-cpp-python sdist (tests/converter_cache.py).
A random model writes junk, so the assertion is that the schema-constrained answer still
parses into a valid verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge import LlamaVerifier, LocalLLM, Rationale
from meteora_edge.models.bundle import Bundle
from meteora_edge.cli.main import main
from meteora_edge.models.llm_file import read_gguf_metadata
from meteora_edge.selection.verification import VerificationRequest

pytestmark = pytest.mark.slow


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


def test_the_fetched_converter_is_reused_and_checked(converter, tiny_llama, tmp_path):
    from meteora_edge.errors import InputError
    from meteora_edge.export.llm import fetch_converter

    assert (converter / ".complete").is_file() and (converter / "gguf-py" / "gguf").is_dir()
    assert fetch_converter(converter) == converter  # no second download
    from meteora_edge.export.llm import export_llm

    with pytest.raises(InputError, match="not a llama.cpp checkout"):
        export_llm(str(tiny_llama), tmp_path / "b", llama_cpp_dir=tmp_path)


def test_cli_export_llm_converts_and_quantises(tiny_llama, converter, tmp_path):
    pytest.importorskip("llama_cpp")
    bundle = tmp_path / "bundle"
    result = CliRunner().invoke(main, ["export", "llm", str(tiny_llama), "--out", str(bundle), "--quant", "Q8_0",
                                       "--llama-cpp", str(converter)])
    assert result.exit_code == 0, result.output
    assert "llm llm/model.Q8_0.gguf (Q8_0" in result.output
    _judge(bundle)


def _with_marked_tokenizer(source: Path, target: Path) -> Path:
    """``source`` rewritten with one more tokenizer key, as a GGUF whose tokenizer can be told apart."""
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, arch=reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if not field.name.startswith("GGUF.") and field.name != "general.architecture":
            kind = field.types[0]
            writer.add_key_value(field.name, field.contents(), kind,
                                 sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None)
    writer.add_key_value("tokenizer.ggml.meteora_mark", "from the tokenizer GGUF", gguf.GGUFValueType.STRING)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data)
    writer.close()
    return target


def test_the_tokenizer_can_come_from_another_gguf(tiny_llama, converter, tmp_path):
    """export llm --tokenizer-from: the tokenizer.* keys of that GGUF, every other key and tensor converted."""
    pytest.importorskip("llama_cpp")
    from meteora_edge.export.llm import export_llm

    first = export_llm(str(tiny_llama), tmp_path / "a", quant="F16", llama_cpp_dir=converter)
    marked = _with_marked_tokenizer(tmp_path / "a" / first.files["model"].path, tmp_path / "marked.gguf")
    result = CliRunner().invoke(main, ["export", "llm", str(tiny_llama), "--out", str(tmp_path / "b"), "--quant", "Q8_0",
                                       "--llama-cpp", str(converter), "--tokenizer-from", str(marked)])
    assert result.exit_code == 0, result.output
    component = Bundle.load(tmp_path / "b").components["llm"]
    metadata = read_gguf_metadata(tmp_path / "b" / component.files["model"].path)
    assert metadata["tokenizer.ggml.meteora_mark"] == "from the tokenizer GGUF"
    assert metadata["general.architecture"] == "llama" and component.settings["quant"] == "Q8_0"
    _judge(tmp_path / "b")


def test_tokenizer_from_is_refused_for_an_imported_gguf_and_a_missing_file(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["export", "llm", "--gguf", str(tmp_path / "m.gguf"), "--out", str(tmp_path / "b"),
                                  "--tokenizer-from", str(tmp_path / "t.gguf")])
    assert result.exit_code != 0 and "an imported --gguf keeps its own tokenizer" in result.output
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    result = runner.invoke(main, ["export", "llm", str(model_dir), "--out", str(tmp_path / "c"),
                                  "--tokenizer-from", str(tmp_path / "missing.gguf")])
    assert result.exit_code != 0 and "missing.gguf" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "c").exists()
