"""The HTTP API as an app sees it: the OpenAPI document (valid, and the same keys the server reads),
/v1/models, CORS for the origins given and no other, request ids, the access log, JSON for
malformed HTTP, and the default capacity under 20 concurrent requests and a 50-request burst."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from typing import Any

import pytest

from server_process import ROOT, ServerProcess, child_env, cli_command

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from meteora_edge.integrations.api_schema import answer_schema, openapi_document  # noqa: E402
from meteora_edge.integrations.http_server import ServerLimits, create_app, server_config  # noqa: E402
from meteora_edge.integrations.select_request import REQUEST_KEYS, SETTING_KEYS, parse_select_request  # noqa: E402
from meteora_edge.integrations.service import SelectService  # noqa: E402
from meteora_edge.pipeline.config import PipelineConfig  # noqa: E402
from serve_data import CHUNKS  # noqa: E402

GOOD = {"query": "Who may terminate?", "chunks": CHUNKS}
APP_ORIGIN = "http://localhost:5173"
TOKEN = "api-test-token-0123456789abcdef"


class AppServer:
    """``create_app`` under uvicorn with the server's own configuration, in a thread."""

    def __init__(self, service: Any, *, limits: ServerLimits | None = None, **options: Any) -> None:
        self.limits = limits or ServerLimits()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(server_config(create_app(service, limits=self.limits, **options), self.limits))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def exchange(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], Any]:
    """One request: (status, lower-cased headers, parsed JSON or the raw text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        sent = {"Content-Type": "application/json", **(headers or {})} if body is not None else dict(headers or {})
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=sent)
        response = conn.getresponse()
        data = response.read()
        got = {k.lower(): v for k, v in response.getheaders()}
        return response.status, got, json.loads(data) if got.get("content-type", "").startswith("application/json") else data
    finally:
        conn.close()


@pytest.fixture(scope="module")
def app_server():
    server = AppServer(SelectService(), cors_origins=[APP_ORIGIN])
    yield server
    server.stop()


# -- the OpenAPI document ------------------------------------------------------------------------

def request_schema() -> dict:
    """The request's schema as the document shows it."""
    return openapi_document()["components"]["schemas"]["SelectRequest"]


def test_the_openapi_document_is_valid_and_served_as_built(app_server):
    validator = pytest.importorskip("openapi_spec_validator")
    document = openapi_document("0.1.0")
    validator.validate(document)
    validator.validate(openapi_document("0.1.0", token=True))
    status, headers, served = exchange(app_server.port, "GET", "/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json"
    validator.validate(served)
    assert served["paths"].keys() == {"/v1/select", "/v1/rerank", "/rerank", "/v2/rerank", "/v1/models", "/v1/index",
                                      "/v1/health", "/openapi.json", "/docs"}
    assert served["components"]["schemas"]["SelectRequest"] == request_schema()


def test_the_request_schema_has_exactly_the_keys_the_server_reads():
    properties = request_schema()["properties"]
    assert list(properties) == [*REQUEST_KEYS, *SETTING_KEYS]
    assert request_schema()["additionalProperties"] is False


def _valid(schema: dict, value: Any) -> bool:
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize("setting", [f for f in fields(PipelineConfig) if f.name in SETTING_KEYS],
                         ids=lambda f: f.name)
def test_every_setting_s_default_and_choices_fit_its_schema_and_the_server(setting):
    schema = request_schema()
    default = getattr(PipelineConfig(), setting.name)
    assert _valid(schema, {**GOOD, setting.name: default})
    parse_select_request({**GOOD, setting.name: default})
    for choice in schema["properties"][setting.name].get("enum", []):
        if setting.name == "verification" and choice == "llm":
            continue  # needs a server with --llm
        request = parse_select_request({**GOOD, setting.name: choice})
        assert getattr(request.config, setting.name) == choice
    assert not _valid(schema, {**GOOD, setting.name: {"an": "object"}})


@pytest.mark.parametrize("body, valid", [
    (GOOD, True),
    ({"query": "x", "index": "contracts.index", "rationales": ["a", {"text": "b", "label": "l"}]}, True),
    ({"query": "x", "chunks": ["a"], "rationales": "auto", "detail": "full", "t_max": None}, True),
    ({**GOOD, "bogus": 1}, False),
    ({**GOOD, "chunks": []}, False),
    ({**GOOD, "detail": "all"}, False),
    ({**GOOD, "scoring": "cosine"}, False),
    ({**GOOD, "query": 5}, False),
    ({**GOOD, "max_candidates": 10**9}, False),
    ({**GOOD, "max_candidates": 100}, True),
])
def test_the_request_schema_agrees_with_the_server_on_examples(body, valid):
    assert _valid(request_schema(), body) is valid
    if valid and "index" not in body:
        parse_select_request(body)
    elif not valid:
        with pytest.raises(ValueError):
            parse_select_request(body)


@pytest.mark.parametrize("detail", ["summary", "full"])
def test_real_answers_fit_the_answer_schema(app_server, detail):
    status, _, answer = exchange(app_server.port, "POST", "/v1/select", {**GOOD, "detail": detail})
    assert status == 200 and answer["passages"]
    assert _valid(answer_schema(), answer)
    assert not _valid(answer_schema(), {k: v for k, v in answer.items() if k != "passages"})


# -- /v1/models ------------------------------------------------------------------------------------

def test_models_lists_the_loaded_models_by_role_and_the_indexes_by_name(tiny_bundle, tiny_index):
    srv = ServerProcess("--bundle", str(tiny_bundle), "--index", str(tiny_index))
    try:
        status, models = srv.call("GET", "/v1/models")
        _, health = srv.call("GET", "/v1/health")
    finally:
        srv.stop()
    assert status == 200 and models["object"] == "list"
    assert [(m["role"], m["id"]) for m in models["data"]] == [
        ("encoder", health["models"]["encoder"]), ("tokenizer", "whitespace"), ("rerank", tiny_bundle.name)]
    assert models["data"][-1]["routes"] == ["/v1/rerank", "/rerank", "/v2/rerank"]
    assert models["data"][0]["id"].startswith("onnx:tiny-test-encoder:")
    assert models["indexes"] == [{"name": "contracts.index", "chunks": health["indexes"][0]["chunks"],
                                  "generation": health["indexes"][0]["generation"]}]
    assert str(tiny_index) not in json.dumps(models) and str(tiny_bundle) not in json.dumps(models)


# -- CORS ------------------------------------------------------------------------------------------

PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}


def test_a_preflight_from_the_allowed_origin_succeeds_and_its_answers_are_readable(app_server):
    status, headers, _ = exchange(app_server.port, "OPTIONS", "/v1/select", headers={"Origin": APP_ORIGIN, **PREFLIGHT})
    assert status == 200 and headers["access-control-allow-origin"] == APP_ORIGIN
    assert "POST" in headers["access-control-allow-methods"]
    assert "content-type" in headers["access-control-allow-headers"].lower()
    status, headers, answer = exchange(app_server.port, "POST", "/v1/select", GOOD, headers={"Origin": APP_ORIGIN})
    assert status == 200 and answer["passages"] and headers["access-control-allow-origin"] == APP_ORIGIN
    assert {"x-request-id", "retry-after"} <= set(headers["access-control-expose-headers"].lower().split(", "))


def test_a_preflight_from_another_origin_is_refused_in_json(app_server):
    status, headers, answer = exchange(app_server.port, "OPTIONS", "/v1/select",
                                       headers={"Origin": "http://evil.example", **PREFLIGHT})
    assert status == 400 and "access-control-allow-origin" not in headers
    assert answer == {"error": "CORS preflight refused (origin) for origin 'http://evil.example'; the server "
                               f"allows {APP_ORIGIN} (--cors-origin)"}
    status, headers, _ = exchange(app_server.port, "POST", "/v1/select", GOOD, headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in headers  # the browser keeps the answer from the page
    status, _, answer = exchange(app_server.port, "OPTIONS", "/v1/select", headers={
        "Origin": APP_ORIGIN, **PREFLIGHT, "Access-Control-Request-Private-Network": "true"})  # a public page
    assert status == 400 and answer["error"].startswith("CORS preflight refused (private-network) for origin")


def test_without_cors_origins_a_preflight_is_refused():
    server = AppServer(SelectService())
    try:
        status, headers, answer = exchange(server.port, "OPTIONS", "/v1/select", headers={"Origin": APP_ORIGIN, **PREFLIGHT})
    finally:
        server.stop()
    assert status == 405 and answer == {"error": "Method Not Allowed: OPTIONS /v1/select"}
    assert not any(k.startswith("access-control-") for k in headers)


def test_with_a_token_the_preflight_needs_none_but_the_request_does():
    server = AppServer(SelectService(), token=TOKEN, cors_origins=[APP_ORIGIN])
    try:
        preflight = exchange(server.port, "OPTIONS", "/v1/select",
                             headers={"Origin": APP_ORIGIN, **PREFLIGHT, "Access-Control-Request-Headers": "authorization"})
        refused = exchange(server.port, "POST", "/v1/select", GOOD, headers={"Origin": APP_ORIGIN})
        allowed = exchange(server.port, "POST", "/v1/select", GOOD,
                           headers={"Origin": APP_ORIGIN, "Authorization": f"Bearer {TOKEN}"})
    finally:
        server.stop()
    assert preflight[0] == 200 and "authorization" in preflight[1]["access-control-allow-headers"].lower()
    assert refused[0] == 401 and refused[1]["access-control-allow-origin"] == APP_ORIGIN  # the page can read why
    assert allowed[0] == 200 and allowed[2]["passages"]


@pytest.mark.parametrize("args, message", [
    (["--cors-origin", "http://localhost:5173/"], "--cors-origin holds 'http://localhost:5173/', which is not an origin"),
    (["--cors-origin", "localhost:5173"], "which is not an origin: give scheme://host[:port]"),
    (["--cors-origin", "*"], "--cors-origin '*' would let every web page the user opens query the server"),
    (["--stdio", "--cors-origin", APP_ORIGIN], "--stdio talks over pipes; drop --host, --port, --token and --cors-origin"),
])
def test_a_bad_cors_origin_is_refused_in_one_line(args, message):
    import subprocess

    proc = subprocess.run(cli_command("serve", *args), capture_output=True, text=True, cwd=ROOT, env=child_env(),
                          timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: ") and message in proc.stderr


# -- request ids and the access log ---------------------------------------------------------------

def test_request_ids_are_echoed_or_made(app_server):
    port = app_server.port
    assert exchange(port, "GET", "/v1/health", headers={"X-Request-Id": "app-42"})[1]["x-request-id"] == "app-42"
    made = [exchange(port, "GET", "/v1/health")[1]["x-request-id"] for _ in range(2)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", m) for m in made) and made[0] != made[1]
    replaced = exchange(port, "GET", "/v1/health", headers={"X-Request-Id": "x" * 200})[1]["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", replaced)
    for method, path, body in (("GET", "/nothing", None), ("POST", "/v1/select", {"query": 5})):  # errors carry it too
        status, headers, answer = exchange(port, method, path, body, headers={"X-Request-Id": "err-1"})
        assert status in (400, 404) and list(answer) == ["error"] and headers["x-request-id"] == "err-1"


def test_the_access_log_has_one_line_per_request_and_no_bodies_or_tokens():
    srv = ServerProcess("--host", "0.0.0.0", "--token", TOKEN, options=("-v",))
    secret_query = "who may terminate the secret-marker agreement?"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        port = srv.port
        assert exchange(port, "POST", "/v1/select", {"query": secret_query, "chunks": ["a b"]},
                        headers={**auth, "X-Request-Id": "log-1"})[0] == 200
        assert exchange(port, "GET", "/v1/index?name=secret-marker", headers=auth)[0] == 404
        assert exchange(port, "GET", "/v1/health")[0] == 401
        srv.signal()
        log = srv.stderr_text()
    finally:
        srv.stop()
    lines = [line for line in log.splitlines() if ".access: " in line]
    assert len(lines) == 3, log
    assert re.fullmatch(r".*\.access: POST /v1/select 200 \d+\.\d ms id=log-1", lines[0])
    assert re.fullmatch(r".*\.access: GET /v1/index 404 \d+\.\d ms id=[0-9a-f]{32}", lines[1])
    assert re.fullmatch(r".*\.access: GET /v1/health 401 \d+\.\d ms id=[0-9a-f]{32}", lines[2])
    assert "secret-marker" not in log and TOKEN not in log


# -- malformed HTTP --------------------------------------------------------------------------------

def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(data)
        out = b""
        while piece := conn.recv(65536):
            out += piece
    return out


POST_HEAD = b"POST /v1/select HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize("data, status, message", [
    (b"hello\r\n\r\n", 400, "malformed HTTP request: illegal request line: 'hello'"),
    (b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n", 400, "illegal header line: 'Bad Header'"),
    (POST_HEAD + b"Content-Length: abc\r\n\r\n", 400, "malformed HTTP request: bad Content-Length"),
    (POST_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "illegal chunk header"),
    (b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Long: " + b"a" * 20000, 431,
     "malformed HTTP request: Receive buffer too long; send the request line and headers in at most 16 KiB"),
])
def test_malformed_http_is_answered_in_json(app_server, data, status, message):
    answer = _raw(app_server.port, data)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()) and b"content-type: application/json" in head
    assert b"connection: close" in head
    parsed = json.loads(body)
    assert list(parsed) == ["error"] and message in parsed["error"] and "bytearray" not in parsed["error"]
    assert exchange(app_server.port, "GET", "/v1/health")[0] == 200  # the server goes on


# -- the default capacity, with real selections ------------------------------------------------------

def _post(port: int) -> tuple[int, str | None]:
    status, headers, answer = exchange(port, "POST", "/v1/select", GOOD)
    assert status == 200 and answer["passages"] or status == 503 and answer["error"].startswith("busy: ")
    return status, headers.get("retry-after")


def test_real_selections_twenty_at_once_all_succeed_and_a_burst_of_fifty_is_never_dropped(tiny_bundle):
    srv = ServerProcess("--bundle", str(tiny_bundle))  # the default --workers and --queue
    try:
        with ThreadPoolExecutor(20) as pool:
            assert [s for s, _ in pool.map(lambda _: _post(srv.port), range(20))] == [200] * 20
        with ThreadPoolExecutor(50) as pool:
            burst = list(pool.map(lambda _: _post(srv.port), range(50)))  # a dropped connection raises
    finally:
        srv.stop()
    assert {s for s, _ in burst} <= {200, 503}
    assert all(retry == "1" for s, retry in burst if s == 503)


def test_the_docs_show_the_document_the_server_serves():
    from meteora_edge.integrations.api_schema import package_version

    shown = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    assert shown == openapi_document(package_version()), (
        "docs/openapi.json is stale: python -m meteora_edge.integrations.api_schema > docs/openapi.json")


def test_a_websocket_upgrade_is_answered_as_plain_http_behind_the_token():
    server = AppServer(SelectService(), token=TOKEN)
    upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    try:
        refused = exchange(server.port, "GET", "/v1/health", headers=upgrade)
        allowed = exchange(server.port, "GET", "/v1/health", headers={**upgrade, "Authorization": f"Bearer {TOKEN}"})
    finally:
        server.stop()
    assert refused[0] == 401 and "missing or wrong token" in refused[2]["error"]
    assert allowed[0] == 200 and allowed[2]["status"] == "ok"


def test_models_names_the_gguf_file_and_the_keys_it_serves_without_its_folder():
    from meteora_edge.integrations.http_server import models_listing

    class WithLLM:
        generator, verifier = object(), None

        def health(self) -> dict:
            return {"models": {"encoder": "onnx:e:1:int8", "cross_encoder": "onnx-cross:c:2:int8",
                               "llm": {"source": "/home/me/private/qwen2.5-1.5b-q4_k_m.gguf", "chat_format": "chatml",
                                       "context_size": 4096}, "tokenizer": "tokenizer:abc"},
                    "indexes": [{"name": "notes.index", "path": "/home/me/private/notes.index", "generation": "g1",
                                 "chunks": 3}]}

    listing = models_listing(WithLLM())
    assert [(m["role"], m["id"]) for m in listing["data"]] == [
        ("encoder", "onnx:e:1:int8"), ("cross_encoder", "onnx-cross:c:2:int8"),
        ("llm", "qwen2.5-1.5b-q4_k_m.gguf"), ("tokenizer", "tokenizer:abc"), ("rerank", "meteora-edge")]
    assert listing["data"][2]["serves"] == ["generate_rationales"] and listing["data"][2]["context_size"] == 4096
    assert listing["indexes"] == [{"name": "notes.index", "chunks": 3, "generation": "g1"}]
    assert "/home/me/private" not in json.dumps(listing)
