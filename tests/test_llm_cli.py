"""``export llm --gguf`` and ``select --generate-rationales/--verify`` through click's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from cli_checks import one_line_error
from llm_fakes import FakeLlama, write_gguf

from meteora_edge import LlamaRationaleGenerator, LlamaVerifier, LocalLLM
from meteora_edge.models.bundle import Bundle, Component, add_component, file_entry
from meteora_edge.cli import select_command
from meteora_edge.cli.main import main
from meteora_edge.models.encoders import HashingEncoder

from repo_paths import EXAMPLES
CHUNKS = str(EXAMPLES / "contract_clauses.json")
QUERY = "How can the agreement be terminated?"
HOW = "meteora-edge export llm --gguf FILE --out BUNDLE"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def header_gguf(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "tiny-chat.gguf", {
        "general.architecture": "llama", "general.name": "Tiny Chat", "llama.context_length": 2048,
        "general.file_type": 7, "general.license": "apache-2.0", "tokenizer.chat_template": "{{ messages }}",
    })


def test_import_gguf_writes_a_checked_llm_component(tmp_path, header_gguf):
    bundle = tmp_path / "bundle"
    result = run("export", "llm", "--gguf", str(header_gguf), "--out", str(bundle))
    assert result.exit_code == 0, result.output
    assert "llm llm/tiny-chat.gguf (Q8_0" in result.output
    component = Bundle.load(bundle).component("llm")
    assert component.settings == {"chat_format": "gguf", "context_size": 2048, "quant": "Q8_0"}
    assert component.licence == "apache-2.0" and "Tiny Chat" in component.source
    Bundle.load(bundle).verify()
    assert (bundle / "llm" / "tiny-chat.gguf").stat().st_mode & 0o777 == 0o644


def test_import_options_override_the_metadata_and_a_new_model_replaces_the_old_file(tmp_path, header_gguf):
    bundle = tmp_path / "bundle"
    assert run("export", "llm", "--gguf", str(header_gguf), "--out", str(bundle)).exit_code == 0
    other = write_gguf(tmp_path / "base.gguf", {"general.architecture": "gemma3", "gemma3.context_length": 32768})
    result = run("export", "llm", "--gguf", str(other), "--out", str(bundle), "--context-size", "1024", "--licence", "Gemma terms")
    assert result.exit_code == 0, result.output
    component = Bundle.load(bundle).component("llm")
    assert component.settings["chat_format"] == "plain" and component.settings["context_size"] == 1024
    assert component.licence == "Gemma terms"
    assert not (bundle / "llm" / "tiny-chat.gguf").exists() and (bundle / "llm" / "base.gguf").exists()


@pytest.mark.parametrize(
    "args, needles",
    [
        ([], ["exactly one of SOURCE"]),
        (["some/model", "--gguf", "x.gguf"], ["exactly one of SOURCE"]),
        (["--gguf", "missing.gguf"], ["GGUF model not found: missing.gguf"]),
        (["--gguf", "random.bin"], ["is not a GGUF file", "meteora-edge export llm"]),
        (["--gguf", "plain.gguf", "--chat-format", "gguf"], ["has no chat template"]),
        (["modeldir"], ["has no config.json"]),
        (["hfmodel", "--llama-cpp", "modeldir"], ["is not a llama.cpp checkout"]),
    ],
    ids=["nothing", "both", "missing", "random-bytes", "no-template", "not-hf", "bad-checkout"],
)
def test_export_llm_errors_are_one_line_and_write_nothing(tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "random.bin").write_bytes(bytes(range(256)) * 64)
    write_gguf(tmp_path / "plain.gguf", {"general.architecture": "llama"})
    (tmp_path / "modeldir").mkdir()
    (tmp_path / "hfmodel").mkdir()
    (tmp_path / "hfmodel" / "config.json").write_text("{}")
    one_line_error(run("export", "llm", *args, "--out", "bundle"), *needles)
    assert not (tmp_path / "bundle" / "manifest.json").exists()
    assert not list((tmp_path / "bundle").glob("llm/*")) if (tmp_path / "bundle").exists() else True


def test_importing_a_gguf_needs_neither_torch_nor_llama_cpp(tmp_path, header_gguf):
    code = (
        "import sys\n"
        "from meteora_edge.export.llm import import_gguf\n"
        f"import_gguf({str(header_gguf)!r}, {str(tmp_path / 'b')!r})\n"
        "bad = [m for m in ('torch', 'transformers', 'llama_cpp') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_select_llm_flags_without_a_bundle_say_how_to_add_one():
    for flag in ("--verify", "--generate-rationales"):
        one_line_error(run("select", "--chunks", CHUNKS, "--query", QUERY, flag), HOW)


def test_select_with_a_bundle_lacking_an_llm_says_how_to_add_one(tmp_path):
    (tmp_path / "enc.onnx").write_bytes(b"x")
    (tmp_path / "tokenizer.json").write_text("{}")
    add_component(tmp_path, "encoder", Component(kind="encoder", files={
        "fp32": file_entry(tmp_path, "enc.onnx"), "tokenizer": file_entry(tmp_path, "tokenizer.json")}))
    one_line_error(run("select", "--chunks", CHUNKS, "--query", QUERY, "--bundle", str(tmp_path), "--verify"),
                   "has no llm component", HOW)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--rationale", "find the notice period", "--generate-rationales"], "drop --rationale/--rationales"),
        (["--verify", "--verification", "cosine"], "conflicts with --verification cosine"),
    ],
)
def test_select_llm_flag_conflicts(args, needle):
    one_line_error(run("select", "--chunks", CHUNKS, "--query", QUERY, *args), needle)


def _runtime_on(monkeypatch, llm, **defaults):
    """``select`` runs on a runtime over ``llm`` (a LocalLLM on a fake) and the hashing encoder; returns what it was
    loaded with (the bundle folder is an empty stand-in whose manifest is said to hold an llm)."""
    from meteora_edge.pipeline.runtime import SelectRuntime

    seen = {}

    class StandIn:
        components = {"llm": None}

        def __init__(self, path):
            self.root = path

    def load(bundle, *, llm=False, llm_threads=1, context_size=None, sample_shots=None, domain=None, **_):
        seen.update(bundle=str(bundle.root), llm=llm, llm_threads=llm_threads, context_size=context_size)
        return SelectRuntime(llm=llm_model, **{"sample_shots": sample_shots, "domain": domain, **defaults})

    llm_model = llm
    monkeypatch.setattr(select_command, "load_bundle", StandIn)
    monkeypatch.setattr(SelectRuntime, "load", staticmethod(load))
    return seen


def test_select_shows_generated_rationales_and_every_verdict(tmp_path, monkeypatch):
    verdict = '{"relevant": true, "flagged": false, "flag_types": [], "reason": "about termination"}'
    reply = "<rationale_1>[Termination] find the notice period Flag Instructions: reject draft notes</rationale_1>"
    fake = FakeLlama([reply] + [verdict] * 20)
    llm = LocalLLM(fake)
    seen = _runtime_on(monkeypatch, llm, sample_shots=[{"query": "q", "rationales": ["x"]}])
    result = run("select", "--chunks", CHUNKS, "--query", QUERY, "--bundle", str(tmp_path), "--generate-rationales",
                 "--num-rationales", "1", "--verify", "--llm-threads", "1", "--context-size", "2048", "--trace")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert seen == {"bundle": str(tmp_path), "llm": True, "llm_threads": 1, "context_size": 2048}
    assert data["rationale_source"] == "generated"
    assert data["rationales"] == [{"index": 1, "label": "Termination", "text": "find the notice period",
                                   "flag_instructions": "reject draft notes"}]
    assert data["verdicts"] and all(v["accepted"] and v["reason"] == "about termination" for v in data["verdicts"])
    assert len(data["verdicts"]) == len(fake.calls) - 1


FAKE_CONVERTER = '''
import struct, sys
args = sys.argv[1:]
if "fail" in args[0]:
    sys.exit("ERROR:hf-to-gguf:Model NoSuchModel is not supported")
out = args[args.index("--outfile") + 1]
def s(x):
    b = x.encode(); return struct.pack("<Q", len(b)) + b
kv = s("general.architecture") + struct.pack("<I", 8) + s("llama") + s("general.file_type") + struct.pack("<Iq", 11, 1)
head = struct.pack("<4sIQQ", b"GGUF", 3, 1, 2) + kv + s("t0") + struct.pack("<IQIQ", 1, 8, 0, 0)  # one F32 tensor
open(out, "wb").write(head + bytes(-len(head) % 32) + bytes(32))
'''


@pytest.fixture
def fake_checkout(tmp_path: Path) -> Path:
    """A stand-in llama.cpp checkout whose converter writes a one-tensor F16 GGUF (or fails)."""
    root = tmp_path / "llama.cpp"
    (root / "gguf-py" / "gguf").mkdir(parents=True)
    (root / "convert_hf_to_gguf.py").write_text(FAKE_CONVERTER)
    for name in ("hf-ok", "hf-fail"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    return root


def test_export_llm_runs_the_converter_and_installs_its_output(tmp_path, fake_checkout):
    result = run("export", "llm", str(tmp_path / "hf-ok"), "--out", str(tmp_path / "b"), "--quant", "F16",
                 "--llama-cpp", str(fake_checkout), "--licence", "MIT")
    assert result.exit_code == 0, result.output
    component = Bundle.load(tmp_path / "b").component("llm")
    assert component.files["model"].path == "llm/hf-ok.F16.gguf" and component.settings["quant"] == "F16"
    assert component.licence == "MIT" and component.report["method"] == "convert_hf_to_gguf"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["llm", "manifest.json"]  # no temporary folder left


def test_a_failed_conversion_quotes_the_converter_and_leaves_nothing(tmp_path, fake_checkout):
    result = run("export", "llm", str(tmp_path / "hf-fail"), "--out", str(tmp_path / "b"), "--llama-cpp", str(fake_checkout))
    one_line_error(result, "converter", "Model NoSuchModel is not supported")
    assert not (tmp_path / "b").exists()


def test_select_batches_verdicts_and_reranks_with_the_model(monkeypatch, tmp_path):
    pytest.importorskip("llama_cpp")
    import re

    from meteora_edge.selection.llm_batch_verifier import LlamaBatchVerifier
    from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer

    def answer(prompt: str) -> str:  # the batch verifier asks one value at a time
        return " true" if prompt.endswith('"relevant":') else " false"

    def logits(prompt: str) -> dict:
        passage = prompt.rsplit("Passage: ", 1)[-1]
        return {"Yes": 3.0 if re.search(r"terminat", passage, re.I) else -3.0, "No": 0.0}

    fake = FakeLlama([answer] * 200, logits=logits)
    llm = LocalLLM(fake)
    _runtime_on(monkeypatch, llm)
    result = run("select", "--chunks", CHUNKS, "--query", QUERY, "--bundle", str(tmp_path), "--verify",
                 "--verify-batch", "4", "--llm-rerank", "--trace")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert any(fake.prompt_text(i).endswith('"relevant":') for i in range(len(fake.calls)))  # the batch prompt
    rerank = data["trace"]["phases"][1]["details"]["llm_rerank"]
    assert rerank["pool"] and set(rerank["kept"]) <= set(rerank["pool"])
    assert data["verdicts"] and all(v["accepted"] for v in data["verdicts"])
    assert data["trace"]["config"]["verification_batch"] == 4
    assert "terminat" in data["passages"][0]["text"].lower()  # the rerank puts what the model backs first


def test_select_reject_tells_the_rerank_to_score_a_matching_chunk_down(monkeypatch, tmp_path):
    pytest.importorskip("llama_cpp")

    def logits(prompt: str) -> dict:  # backs every termination clause, unless a rule rejects drafts
        passage = prompt.rsplit("Passage: ", 1)[-1]
        if "rejection rules: (1) draft notes" in prompt and "DRAFT NOTE" in passage:
            return {"Yes": -3.0, "No": 3.0}
        return {"Yes": 3.0 if "terminat" in passage.lower() else -3.0, "No": 0.0}

    def rerank_of(*extra):
        _runtime_on(monkeypatch, LocalLLM(FakeLlama(logits=logits)))
        result = run("select", "--chunks", CHUNKS, "--query", "Which notice period ends the agreement?",
                     "--bundle", str(tmp_path), "--llm-rerank", "--trace", *extra)
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        return data["trace"]["phases"][1]["details"]["llm_rerank"], [c["llm_score"] for c in data["trace"]["candidates"]
                                                                     if "DRAFT NOTE" in c["text"]]

    plain, draft_plain = rerank_of()
    ruled, draft_ruled = rerank_of("--reject", "draft notes that are not part of the signed agreement")
    assert plain["rules"] == [] and ruled["rules"] == ["draft notes that are not part of the signed agreement"]
    assert draft_plain == [3.0] and draft_ruled == [-6.0]  # log P(Yes) − log P(No)
    one_line_error(run("select", "--chunks", CHUNKS, "--query", QUERY, "--reject", "drafts"),
                   "--reject rules are applied by the LLM; add --verify or --llm-rerank")
