"""Rerank clients that are not ours, as they ship, pointed at a local `meteora-edge serve` with the real
MiniLM encoder: the cohere SDK (v2 and v1 clients), LangChain's CohereRerank, LiteLLM's rerank() with an
api_base (its cohere and jina_ai providers), and the exact request Open WebUI's external reranker sends
(its payload, headers and the way it reads the answer). Each gets the selection /v1/select makes for
the same query and documents: the results at or above 0.5 are exactly the selected passages."""

from __future__ import annotations

import json

import pytest

from repo_paths import ROOT
from server_process import ServerProcess

pytest.importorskip("uvicorn")

QUERY = "How can the agreement be terminated, and what happens then?"
DOCUMENTS = [c["text"] for c in json.loads((ROOT / "examples" / "contract_clauses.json").read_text())["chunks"]]


@pytest.fixture(scope="module")
def server(minilm):
    srv = ServerProcess("--bundle", str(minilm))
    status, selection = srv.call("POST", "/v1/select", {"query": QUERY, "chunks": DOCUMENTS})
    assert status == 200
    srv.selected = [p["id"] for p in selection["passages"]]  # the selection, in context order
    assert 0 < len(srv.selected) < len(DOCUMENTS)
    yield srv
    srv.stop()


def kept(results: list[tuple[int, float]]) -> list[int]:
    """The indexes an app keeps with a relevance threshold of 0.5, in the order the client returned them."""
    return [index for index, score in results if score >= 0.5]


def test_open_webui_external_reranker_request(server, minilm):
    requests = pytest.importorskip("requests")
    # open_webui/retrieval/models/external.py, ExternalReranker.predict: its payload and headers
    payload = {"model": minilm.name, "query": QUERY, "documents": DOCUMENTS, "top_n": len(DOCUMENTS)}
    r = requests.post(f"{server.url}/v1/rerank", headers={"Content-Type": "application/json",
                                                         "Authorization": "Bearer "}, json=payload, timeout=60)
    r.raise_for_status()
    data = r.json()
    assert "results" in data
    scores = [result["relevance_score"] for result in sorted(data["results"], key=lambda x: x["index"])]
    # Open WebUI zips these scores with its documents and keeps those at or above its relevance threshold
    assert len(scores) == len(DOCUMENTS)
    assert {i for i, s in enumerate(scores) if s >= 0.5} == set(server.selected)


def test_cohere_sdk_v2_and_v1_clients(server, minilm):
    cohere = pytest.importorskip("cohere")
    v2 = cohere.ClientV2(api_key="unused", base_url=server.url).rerank(
        model=minilm.name, query=QUERY, documents=DOCUMENTS, top_n=len(DOCUMENTS))
    assert kept([(r.index, r.relevance_score) for r in v2.results]) == server.selected
    v1 = cohere.Client(api_key="unused", base_url=server.url).rerank(
        model=minilm.name, query=QUERY, documents=DOCUMENTS, top_n=3, return_documents=True)
    assert len(v1.results) == 3 and [r.index for r in v1.results][: len(server.selected)] == server.selected[:3]
    assert [r.document.text for r in v1.results] == [DOCUMENTS[r.index] for r in v1.results]


def test_langchain_cohere_rerank_in_a_compression_retriever(server, minilm):
    pytest.importorskip("langchain_cohere")
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [Document(page_content=text, metadata={"clause": i}) for i, text in enumerate(DOCUMENTS)]

    reranker = CohereRerank(model=minilm.name, base_url=server.url, cohere_api_key="unused", top_n=len(DOCUMENTS))
    docs = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=Fixed()).invoke(QUERY)
    assert len(docs) == len(DOCUMENTS)
    assert kept([(d.metadata["clause"], d.metadata["relevance_score"]) for d in docs]) == server.selected


@pytest.mark.parametrize("provider", ["cohere", "jina_ai"])
def test_litellm_rerank_with_an_api_base(server, minilm, provider, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the model price list shipped in the package
    litellm = pytest.importorskip("litellm")
    response = litellm.rerank(model=f"{provider}/{minilm.name}", query=QUERY, documents=DOCUMENTS,
                              top_n=len(DOCUMENTS), api_base=server.url, api_key="unused")
    assert len(response.results) == len(DOCUMENTS)
    assert kept([(r["index"], r["relevance_score"]) for r in response.results]) == server.selected


def test_a_client_naming_another_model_gets_the_one_line_error(server):
    cohere = pytest.importorskip("cohere")
    with pytest.raises(cohere.core.api_error.ApiError) as info:
        cohere.ClientV2(api_key="unused", base_url=server.url).rerank(model="rerank-v3.5", query=QUERY,
                                                                       documents=DOCUMENTS)
    assert info.value.status_code == 400
    assert "this server has no model 'rerank-v3.5'" in info.value.body["error"]
