"""`serve --stdio` through pipes: one answer per request line, in order; a bad line gets an error
object and the loop goes on; blank lines are passed over; end of input or a signal ends it (exit 0)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess

import pytest

from server_process import ROOT, child_env, cli_command
from serve_data import CHUNKS

from meteora_edge.integrations.service import SelectService
from meteora_edge.integrations.stdio import serve_stdio

GOOD = json.dumps({"query": "Who may terminate?", "chunks": CHUNKS})


def test_a_child_process_answers_line_by_line_and_survives_bad_lines():
    lines = [GOOD, "", "not json", "[1]", '{"query": "x", "chunks": ["a"], "t_max": -1}', "   ", GOOD,
             '{"query": "caf\\u00e9 \\ud800", "chunks": ["caf\\u00e9 \\ud800 bar"]}']
    proc = subprocess.run(cli_command("serve", "--stdio"), input="\n".join(lines), capture_output=True, text=True,
                          cwd=ROOT, env=child_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == 6  # the two blank lines are passed over; the last line has no newline
    assert answers[0]["format"] == "meteora-edge.selection" and answers[0]["passages"]
    assert answers[1] == {"error": "malformed JSON: Expecting value at line 1 column 1"}
    assert answers[2] == {"error": "the body must be a JSON object, got list"}
    assert answers[3] == {"error": "t_max must be an integer >= 1 or None, got -1"}
    assert answers[4] == answers[0] | {"phases": answers[4]["phases"]}  # same answer, its own timings
    assert "lone surrogate" in answers[5]["error"]  # refused in one line, like select; the loop goes on
    assert "hashing encoder" in proc.stderr and "Traceback" not in proc.stderr


def test_an_oversize_line_is_refused_and_the_next_one_answered():
    out = io.BytesIO()
    big = json.dumps({"query": "x" * 5000, "chunks": ["x"]}).encode()
    count = serve_stdio(SelectService(), io.BytesIO(big + b"\n" + GOOD.encode() + b"\n"), out, max_line_bytes=4096)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert count == 2 and answers[0] == {
        "error": "the line has more than 4096 bytes, the limit (--max-body-mb); send a smaller request"}
    assert answers[1]["passages"]


def test_sigterm_ends_a_waiting_stdio_server_with_exit_0():
    proc = subprocess.Popen(cli_command("serve", "--stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT, env=child_env())
    try:
        proc.stdin.write(GOOD.encode() + b"\n")
        proc.stdin.flush()
        first = proc.stdout.readline()  # answered: the loop now waits on stdin
        assert json.loads(first)["passages"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


def test_a_huge_integer_or_a_lone_surrogate_anywhere_is_an_error_line_and_the_loop_goes_on():
    lines = [b'{"query": "x", "chunks": ["a"], "k_init": ' + b"9" * 5000 + b"}",
             b'{"query": "x", "chunks": [{"text": "a b", "metadata": {"tag": "\\udc80"}}]}',
             b'{"query": "x \\ud83d\\ude00", "chunks": ["a b"]}', GOOD.encode()]
    out = io.BytesIO()
    assert serve_stdio(SelectService(), io.BytesIO(b"\n".join(lines) + b"\n"), out) == 4
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[0] == {"error": "the body holds an integer of more than 4300 digits; send smaller numbers"}
    assert answers[1] == {"error": "'chunks'[0]['metadata']['tag'] holds '\\udc80' at character 0, a lone "
                                   "surrogate that is not valid Unicode; fix the encoding of its source"}
    assert answers[2]["query"] == "x \U0001F600" and answers[2]["passages"]  # a surrogate pair is a character
    assert answers[3]["passages"]


def _answers(*lines: bytes | str) -> list[dict]:
    raw = b"\n".join(line.encode() if isinstance(line, str) else line for line in lines) + b"\n"
    out = io.BytesIO()
    count = serve_stdio(SelectService(), io.BytesIO(raw), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert count == len(answers)
    return answers


def _rpc(request_id, params, method="select") -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


BODY = json.loads(GOOD)


def test_json_rpc_requests_are_answered_with_their_id_and_the_select_result():
    answers = _answers(_rpc(7, BODY), _rpc("req-b", {**BODY, "t_max": 5}), GOOD)
    plain = answers[2]
    assert [(a["jsonrpc"], a["id"]) for a in answers[:2]] == [("2.0", 7), ("2.0", "req-b")]
    assert set(answers[0]) == {"jsonrpc", "id", "result"}
    assert answers[0]["result"] == plain | {"phases": answers[0]["result"]["phases"]}  # the bare answer, framed
    assert answers[1]["result"]["tokens"] <= 5


@pytest.mark.parametrize("line, request_id, code, message", [
    (_rpc(1, {"query": "x", "chunks": []}), 1, -32602, "'chunks' is empty; give at least one chunk"),
    (_rpc("s", {**BODY, "t_max": -1}), "s", -32602, "t_max must be an integer >= 1 or None, got -1"),
    (_rpc(2, BODY, method="rerank"), 2, -32601, "no method 'rerank'; this server has select"),
    (_rpc(3, [1, 2]), 3, -32602, "'params' must be the request object, got list"),
    (json.dumps({"jsonrpc": "1.0", "id": 4, "method": "select", "params": BODY}), 4, -32600,
     "'jsonrpc' must be \"2.0\", got '1.0'"),
    (json.dumps({"jsonrpc": "2.0", "id": 5, "method": "select", "params": BODY, "extra": 1}), 5, -32600,
     "unknown member(s) 'extra' of a JSON-RPC request"),
    (json.dumps({"jsonrpc": "2.0", "id": [1], "method": "select", "params": BODY}), None, -32600,
     "'id' must be a string or an integer, got list"),
    ('{"jsonrpc": "2.0", "id": 6, "method": "select", "params": {', None, -32700, "malformed JSON"),
    (json.dumps([{"jsonrpc": "2.0", "id": 8, "method": "select", "params": BODY}]), None, -32600,
     "batches are not supported; send one request a line"),
])
def test_json_rpc_errors_carry_the_id_a_code_and_one_line(line, request_id, code, message):
    answer, after = _answers(line, _rpc(99, BODY))
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id and set(answer) == {"jsonrpc", "id", "error"}
    assert answer["error"]["code"] == code and message in answer["error"]["message"]
    assert after["id"] == 99 and after["result"]["passages"]  # the loop goes on


def test_a_json_rpc_notification_is_not_answered():
    notification = json.dumps({"jsonrpc": "2.0", "method": "select", "params": BODY})
    bad_notification = json.dumps({"jsonrpc": "2.0", "method": "nope"})
    answers = _answers(notification, bad_notification, _rpc(1, BODY))
    assert [a["id"] for a in answers] == [1]


def test_a_bare_request_may_carry_an_id_that_its_answer_and_its_error_echo():
    first, error, plain, bad_id = _answers(
        json.dumps({"id": 41, **BODY}), json.dumps({"id": "q-2", "query": "x", "chunks": []}), GOOD,
        json.dumps({"id": 1.5, **BODY}))
    assert list(first)[0] == "id" and first["id"] == 41
    assert {k: v for k, v in first.items() if k != "id"} == plain | {"phases": first["phases"]}
    assert error == {"id": "q-2", "error": "'chunks' is empty; give at least one chunk"}
    assert "id" not in plain and plain["passages"]
    assert bad_id == {"error": "'id' must be a string or an integer, got float"}


def test_the_environment_token_does_not_stop_a_stdio_server():
    env = {**child_env(), "METEORA_EDGE_TOKEN": "an-environment-token-0123456789"}
    proc = subprocess.run(cli_command("serve", "--stdio"), input=_rpc(1, BODY) + "\n", capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["passages"] and "--token" not in proc.stderr
    given = subprocess.run(cli_command("serve", "--stdio", "--token", "an-environment-token-0123456789"), input="",
                           capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=60)
    assert given.returncode == 1 and "--stdio talks over pipes; drop --host, --port, --token and --cors-origin" in given.stderr
