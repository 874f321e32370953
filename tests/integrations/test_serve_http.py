"""The HTTP server from the outside: every bad request is a 4xx with one line of JSON, the token
guards every endpoint, a non-loopback bind needs one, oversize bodies are refused, signals end
it cleanly, and a rebuilt index is picked up."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from server_process import ROOT, ServerProcess, call, child_env, cli_command

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from serve_data import CHUNKS  # noqa: E402

TOKEN = "test-token-0123456789abcdef"
GOOD = {"query": "Who may terminate?", "chunks": CHUNKS}


@pytest.fixture(scope="module")
def server(tiny_bundle, tiny_index):
    proc = ServerProcess("--bundle", str(tiny_bundle), "--index", str(tiny_index), "--max-body-mb", "1")
    yield proc
    proc.stop()


BAD_REQUESTS = [
    (b"{\"query\": ", "malformed JSON: Expecting value at line 1 column 11"),
    (b"[1, 2]", "the body must be a JSON object, got list"),
    (b"\xff\xfe", "the body is not UTF-8 text; send JSON"),
    (b'{"query": "x", "chunks": ["a"], "k_init": NaN}', "the body holds NaN, which is not JSON; send numbers only"),
    (json.dumps({**GOOD, "bogus": 1, "alsobad": 2}).encode(), "unknown key(s) 'alsobad', 'bogus'; the request takes"),
    (json.dumps({"query": 5, "chunks": ["a"]}).encode(), "'query' must be a string, got int"),
    (json.dumps({"query": "x", "chunks": "a b"}).encode(), "'chunks' must be a list of chunks, got str"),
    (json.dumps({"query": "x", "chunks": []}).encode(), "'chunks' is empty; give at least one chunk"),
    (json.dumps({"query": "x", "chunks": [{"title": "no text"}]}).encode(), "document at position 0 is a mapping without a text"),
    (json.dumps({**GOOD, "k_init": "5"}).encode(), "k_init must be an integer >= 1, got '5'"),
    (json.dumps({**GOOD, "t_max": 0}).encode(), "t_max must be an integer >= 1 or None, got 0"),
    (json.dumps({**GOOD, "use_ecse": "yes"}).encode(), "use_ecse must be true or false, got 'yes'"),
    (json.dumps({**GOOD, "detail": "all"}).encode(), "'detail' must be \"summary\" or \"full\", got 'all'"),
    (json.dumps({**GOOD, "verify": "true"}).encode(), "'verify' must be true or false, got str"),
    (json.dumps({**GOOD, "index": "contracts.index"}).encode(), "give 'chunks' or 'index', not both"),
    (json.dumps({"index": "contracts.index"}).encode(), "a search of the index needs a non-empty 'query'"),
    (json.dumps({"query": "x", "index": "other.index"}).encode(), "no index named 'other.index' on this server; it has 'contracts.index'"),
    (json.dumps({**GOOD, "verify": True}).encode(), "'verify' needs the GGUF model: this server has no GGUF model"),
    (json.dumps({**GOOD, "generate_rationales": True}).encode(), "'generate_rationales' needs the GGUF model"),
    (json.dumps({**GOOD, "verification": "cross-encoder"}).encode(), "cross-encoder"),
    (json.dumps({**GOOD, "max_candidates": 10**9}).encode(), "'max_candidates' may only lower the limit"),
    (json.dumps({"chunks": ["a"]}).encode(), "no rationale and no query; give 'query' or 'rationales'"),
    (b'{"query": "x", "chunks": ["a"], "k_init": 1' + b"0" * 5000 + b"}",
     "the body holds an integer of more than 4300 digits; send smaller numbers"),
    (b'{"query": "a \\ud800", "chunks": ["a"]}', "'query' holds '\\ud800' at character 2, a lone surrogate"),
    (b'{"query": "a", "chunks": ["a"], "rationales": ["\\udfff"]}', "'rationales'[0] holds '\\udfff'"),
    (b'{"query": "a", "chunks": [{"text": "a", "source": "\\ud800"}]}', "'chunks'[0]['source'] holds '\\ud800'"),
    (b'{"query": "a", "chunks": [{"text": "a", "\\udbff": 1}]}', "a key of 'chunks'[0] holds '\\udbff'"),
]


@pytest.mark.parametrize("raw, message", BAD_REQUESTS, ids=[m[:30] for _, m in BAD_REQUESTS])
def test_every_bad_request_is_a_400_with_one_line(server, raw, message):
    status, answer = server.call("POST", "/v1/select", raw=raw)
    assert status == 400, answer
    assert list(answer) == ["error"] and message in answer["error"]
    assert "\n" not in answer["error"] and "Traceback" not in answer["error"]


@pytest.mark.parametrize("method, path, kwargs, status, message", [
    ("POST", "/v1/select", {"content_type": "text/plain"}, 415, "Content-Type: application/json"),
    ("GET", "/v1/select", {}, 405, "Method Not Allowed: GET /v1/select"),
    ("POST", "/v1/nothing", {}, 404, "Not Found: POST /v1/nothing"),
    ("GET", "/v1/index?name=nope", {}, 404, "no index named 'nope' on this server"),
    ("GET", "/v1/health", {"headers": {"Host": "attacker.example:80"}}, 421, "only requests addressed to localhost"),
])
def test_wrong_method_path_type_or_host(server, method, path, kwargs, status, message):
    got, answer = server.call(method, path, GOOD if method == "POST" else None, **kwargs)
    assert (got, list(answer)) == (status, ["error"]) and message in answer["error"]


def test_oversize_bodies_are_refused_with_413(server):
    limit = 2**20
    big = json.dumps({**GOOD, "query": "x" * limit}).encode()
    status, answer = server.call("POST", "/v1/select", raw=big)  # with Content-Length
    assert status == 413 and "over the server's limit of 1048576 bytes" in answer["error"]
    pieces = (big[i:i + 65536] for i in range(0, len(big), 65536))  # chunked: no length given up front
    status, answer = server.call("POST", "/v1/select", raw=pieces)
    assert status == 413 and "more than 1048576 bytes" in answer["error"]
    status, answer = server.call("POST", "/v1/select", GOOD)  # the server goes on
    assert status == 200 and answer["passages"]


def test_index_and_health_describe_what_the_server_loaded(server, tiny_bundle, tiny_index):
    status, info = server.call("GET", "/v1/index")
    assert status == 200
    cli = CliRunner().invoke(main, ["index", "info", str(tiny_index)])
    assert cli.exit_code == 0, cli.output
    assert info == {"name": "contracts.index", **json.loads(cli.stdout)}
    assert server.call("GET", "/v1/index?name=contracts.index") == (200, info)

    status, health = server.call("GET", "/v1/health")
    assert status == 200 and health["status"] == "ok"
    assert {"meteora-edge", "python", "onnxruntime", "starlette", "uvicorn"} <= set(health["versions"])
    encoder = health["bundle"]["components"]["encoder"]
    assert encoder["kind"] == "encoder" and encoder["source"] == "tiny-test-encoder"
    assert health["models"]["encoder"] == info["encoder"]["id"]
    assert health["models"]["encoder"].startswith("onnx:tiny-test-encoder:")
    assert health["models"]["llm"] is None and health["models"]["tokenizer"] == "whitespace"
    assert health["indexes"] == [{"name": "contracts.index", "path": str(tiny_index),
                                  "generation": info["generation"], "chunks": info["chunks"]}]
    assert health["limits"] == {"workers": 2, "queue": 32, "max_body_bytes": 2**20, "header_timeout": 10.0,
                                "body_timeout": 30.0, "keep_alive": 5.0, "max_connections": 256,
                                "request_timeout": 60.0}


@pytest.mark.parametrize("args, message", [
    (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0, which is not a loopback address, without --token"),
    (["--host", "192.0.2.1"], "refusing to listen on 192.0.2.1"),
    (["--host", "0.0.0.0", "--token", "short"], "--token must have at least 16 characters, got 5"),
    (["--stdio", "--token", TOKEN], "--stdio talks over pipes; drop --host, --port, --token and --cors-origin"),
])
def test_a_non_loopback_bind_without_a_token_is_refused(args, message):
    proc = subprocess.run(cli_command("serve", *args), capture_output=True, text=True, cwd=ROOT, env=child_env(),
                          timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: ") and message in proc.stderr


def test_with_a_token_every_endpoint_needs_it():
    srv = ServerProcess("--host", "0.0.0.0", "--token", TOKEN)  # every interface, loopback included
    try:
        assert srv.url.startswith("http://0.0.0.0:")
        for method, path, body in (("GET", "/v1/health", None), ("GET", "/v1/index", None),
                                   ("POST", "/v1/select", GOOD), ("GET", "/nothing", None)):
            for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN},
                            {"Authorization": f"Basic {TOKEN}"}):
                status, answer = call("127.0.0.1", srv.port, method, path, body, headers=headers)
                assert status == 401 and "missing or wrong token" in answer["error"], (path, headers)
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert call("127.0.0.1", srv.port, "GET", "/v1/health", headers=good)[0] == 200
        status, answer = call("127.0.0.1", srv.port, "POST", "/v1/select", GOOD, headers=good)
        assert status == 200 and answer["passages"]
        # a token-guarded server on all interfaces takes any Host header
        assert call("127.0.0.1", srv.port, "GET", "/v1/health", headers={**good, "Host": "box.lan"})[0] == 200
    finally:
        srv.stop()


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_shuts_the_server_down_cleanly(signum):
    srv = ServerProcess()
    try:
        assert srv.call("POST", "/v1/select", GOOD)[0] == 200
        started = time.monotonic()
        assert srv.signal(signum, timeout=10) == 0
        assert time.monotonic() - started < 5
        assert "Traceback" not in srv.stderr_text()
        assert _port_is_free(srv.port)
    finally:
        srv.stop()


def test_the_server_picks_up_a_rebuilt_index(tiny_bundle, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Either party may terminate the agreement.")
    (docs / "b.md").write_text("The supplier shall deliver goods after written notice.")
    index = tmp_path / "live.index"
    run = CliRunner().invoke
    assert run(main, ["index", "build", str(docs / "a.md"), "--out", str(index), "--bundle", str(tiny_bundle)]).exit_code == 0
    srv = ServerProcess("--bundle", str(tiny_bundle), "--index", str(index))
    try:
        status, before = srv.call("POST", "/v1/select", {"query": "who shall deliver goods?"})
        assert status == 200 and "supplier" not in json.dumps(before["passages"])
        result = run(main, ["index", "add", str(index), str(docs / "b.md"), "--bundle", str(tiny_bundle)])
        assert result.exit_code == 0, result.output
        status, after = srv.call("POST", "/v1/select", {"query": "who shall deliver goods?"})
        assert status == 200 and after["passages"][0]["text"].startswith("The supplier shall deliver goods")
        assert srv.call("GET", "/v1/index")[1]["chunks"] == 2
    finally:
        srv.stop()
