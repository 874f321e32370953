"""The rerank routes (/v1/rerank, /rerank, /v2/rerank): one result per document, the selection first
at or above 0.5, the same selection as /v1/select, /v1/select's options through the extension field,
and the same guards, limits, CORS, request ids and JSON errors as /v1/select."""

from __future__ import annotations

import http.client
import json

import pytest

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from meteora_edge.integrations.api_schema import openapi_document  # noqa: E402
from meteora_edge.integrations.http_server import ServerLimits  # noqa: E402
from meteora_edge.integrations.rerank_api import SELECTED_THRESHOLD, relevance_scores, rerank  # noqa: E402
from meteora_edge.integrations.service import SelectService  # noqa: E402
from serve_data import CHUNKS  # noqa: E402
from test_serve_api import APP_ORIGIN, PREFLIGHT, TOKEN, AppServer, _valid, exchange  # noqa: E402

QUERY = "Who may terminate the agreement?"
TEXTS = [c["text"] for c in CHUNKS]


@pytest.fixture(scope="module")
def server():
    srv = AppServer(SelectService(), cors_origins=[APP_ORIGIN])
    yield srv
    srv.stop()


def open_webui_predict(port: int, model: str, query: str, docs: list[str], api_key: str = "") -> list[float]:
    """What Open WebUI's ExternalReranker.predict does with the answer: its exact payload and headers,
    the results sorted by index, their scores in document order."""
    payload = {"model": model, "query": query, "documents": docs, "top_n": len(docs)}
    status, _, data = exchange(port, "POST", "/v1/rerank", payload,
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"})
    assert status == 200, data
    return [r["relevance_score"] for r in sorted(data["results"], key=lambda r: r["index"])]


def test_open_webui_gets_one_score_per_document_and_its_threshold_keeps_exactly_the_selection(server):
    scores = open_webui_predict(server.port, "meteora-edge", QUERY, TEXTS)
    _, _, selection = exchange(server.port, "POST", "/v1/select", {"query": QUERY, "chunks": TEXTS})
    chosen = {p["id"] for p in selection["passages"]}
    assert len(scores) == len(TEXTS) and all(0 <= s <= 1 for s in scores)
    assert chosen and chosen != set(range(len(TEXTS)))  # the test means something: some kept, some not
    assert {i for i, s in enumerate(scores) if s >= SELECTED_THRESHOLD} == chosen


@pytest.mark.parametrize("path", ["/v1/rerank", "/rerank", "/v2/rerank"])
def test_every_route_answers_best_first_with_the_selection_marked(server, path):
    status, headers, data = exchange(server.port, "POST", path, {"query": QUERY, "documents": TEXTS},
                                     headers={"X-Request-Id": "rr-1"})
    assert status == 200 and headers["x-request-id"] == "rr-1" and data["model"] == "meteora-edge"
    scores = [r["relevance_score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True) and sorted(r["index"] for r in data["results"]) == list(range(5))
    marked = [r["meteora_edge"]["selected"] for r in data["results"]]
    assert marked == sorted(marked, reverse=True)  # the selected ones first
    selected = [r["index"] for r in data["results"] if r["meteora_edge"]["selected"]]
    assert selected == data["meteora_edge"]["selected"] and data["meteora_edge"]["threshold"] == 0.5
    assert [r["meteora_edge"]["rank"] for r in data["results"][: len(selected)]] == list(range(1, len(selected) + 1))
    document = openapi_document()
    schema = {**document["components"]["schemas"]["RerankAnswer"], "components": document["components"]}
    assert _valid(schema, data)


def test_top_n_return_documents_and_text_objects(server):
    body = {"query": QUERY, "documents": [{"text": t} for t in TEXTS], "top_n": 2, "return_documents": True}
    _, _, data = exchange(server.port, "POST", "/v1/rerank", body)
    _, _, full = exchange(server.port, "POST", "/v1/rerank", {"query": QUERY, "documents": TEXTS})
    assert [r["index"] for r in data["results"]] == [r["index"] for r in full["results"][:2]]
    assert [r["document"]["text"] for r in data["results"]] == [TEXTS[r["index"]] for r in data["results"]]
    assert "document" not in full["results"][0]


def test_a_document_without_text_scores_zero_and_keeps_its_place(server):
    docs = [TEXTS[0], "   ", *TEXTS[1:]]
    scores = open_webui_predict(server.port, "", QUERY, docs)
    assert len(scores) == len(docs) and scores[1] == 0.0 and scores[0] >= 0.5
    assert open_webui_predict(server.port, "", QUERY, ["", " "]) == [0.0, 0.0]


def test_select_options_go_through_the_extension_field_with_the_same_effect(server):
    options = {"t_max": 4, "theta_redundancy": 0.99}
    _, _, selection = exchange(server.port, "POST", "/v1/select", {"query": QUERY, "chunks": TEXTS, **options})
    _, _, data = exchange(server.port, "POST", "/v1/rerank", {"query": QUERY, "documents": TEXTS,
                                                              "meteora_edge": options})
    _, _, default = exchange(server.port, "POST", "/v1/rerank", {"query": QUERY, "documents": TEXTS})
    assert data["meteora_edge"]["selected"] == [p["id"] for p in selection["passages"]]
    assert data["meteora_edge"]["tokens"] == selection["tokens"] <= 4 < default["meteora_edge"]["tokens"]


@pytest.mark.parametrize("body, message", [
    ({"query": QUERY}, "'documents' must be a non-empty list"),
    ({"query": QUERY, "documents": []}, "'documents' must be a non-empty list"),
    ({"query": " ", "documents": TEXTS}, "a rerank request needs 'query', a non-empty string"),
    ({"query": QUERY, "documents": [5]}, "'documents'[0] must be a string or an object with a 'text' string"),
    ({"query": QUERY, "documents": TEXTS, "top_n": 0}, "'top_n' must be an integer >= 1, got 0"),
    ({"query": QUERY, "documents": TEXTS, "model": "rerank-v3.5"},
     "this server has no model 'rerank-v3.5'; its rerank model is 'meteora-edge'"),
    ({"query": QUERY, "documents": TEXTS, "temperature": 1}, "unknown key(s) 'temperature'; a rerank request takes"),
    ({"query": QUERY, "documents": TEXTS, "meteora_edge": {"chunks": ["x"]}}, "'meteora_edge' may not hold 'chunks'"),
    ({"query": QUERY, "documents": TEXTS, "meteora_edge": {"t_maxx": 3}}, "unknown key(s) 't_maxx' in 'meteora_edge'"),
    ({"query": QUERY, "documents": TEXTS, "meteora_edge": {"t_max": -1}}, "t_max"),
    ({"query": QUERY, "documents": TEXTS, "meteora_edge": {"verify": True}}, "GGUF model"),
    ({"query": QUERY, "documents": TEXTS, "rank_fields": ["title"]}, "'rank_fields' must be [\"text\"]"),
])
def test_bad_requests_get_one_json_line(server, body, message):
    status, _, data = exchange(server.port, "POST", "/v1/rerank", body)
    assert status == 400 and list(data) == ["error"] and message in data["error"] and "\n" not in data["error"]


def test_the_cohere_and_jina_keys_it_has_no_use_for_are_accepted(server):
    body = {"query": QUERY, "documents": TEXTS, "max_tokens_per_doc": 4096, "max_chunks_per_doc": 10,
            "rank_fields": None, "truncation": True}
    assert exchange(server.port, "POST", "/v2/rerank", body)[0] == 200


def test_the_guards_and_limits_of_select_apply():
    srv = AppServer(SelectService(), token=TOKEN, cors_origins=[APP_ORIGIN], limits=ServerLimits(max_body_bytes=2000))
    body = {"query": QUERY, "documents": TEXTS}
    try:
        refused = exchange(srv.port, "POST", "/v1/rerank", body)
        assert refused[0] == 401 and list(refused[2]) == ["error"]
        assert open_webui_predict(srv.port, "meteora-edge", QUERY, TEXTS, api_key=TOKEN)
        auth = {"Authorization": f"Bearer {TOKEN}"}
        big = exchange(srv.port, "POST", "/rerank", {"query": QUERY, "documents": ["word " * 500]}, headers=auth)
        assert big[0] == 413 and "--max-body-mb" in big[2]["error"]
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("POST", "/v2/rerank", body=json.dumps(body), headers={**auth, "Content-Type": "text/plain"})
        response = conn.getresponse()
        assert response.status == 415 and "application/json" in json.loads(response.read())["error"]
        conn.close()
        preflight = exchange(srv.port, "OPTIONS", "/v1/rerank", headers={"Origin": APP_ORIGIN, **PREFLIGHT})
        assert preflight[0] == 200 and preflight[1]["access-control-allow-origin"] == APP_ORIGIN
        wrong_host = exchange(srv.port, "POST", "/v1/rerank", body, headers={**auth, "Host": "evil.example"})
        assert wrong_host[0] == 421
    finally:
        srv.stop()


@pytest.mark.parametrize("selected, others", [
    ([(2, 40.0), (0, -40.0)], {1: 40.0, 3: -3.0, 4: None}),
    ([], {0: 0.3, 1: 0.1}),
    ([(0, 0.9)], {}),
])
def test_relevance_scores_keep_the_bands_for_any_raw_score(selected, others):
    count = max([p for p, _ in selected] + list(others)) + 1
    rows = relevance_scores(count, selected, others)
    assert sorted(p for p, _, _ in rows) == list(range(count))
    assert [p for p, _, chosen in rows if chosen] == [p for p, _ in selected]
    assert all((v >= SELECTED_THRESHOLD) == chosen and 0 <= v <= 1 for _, v, chosen in rows)
    values = [v for _, v, _ in rows]
    assert values == sorted(values, reverse=True)


def test_the_function_and_the_route_answer_alike(server):
    body = {"query": QUERY, "documents": TEXTS, "top_n": 3}
    assert exchange(server.port, "POST", "/v1/rerank", body)[2] == rerank(SelectService(), body)
