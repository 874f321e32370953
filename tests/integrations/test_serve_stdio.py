"""`serve --stdio` through pipes: one answer per request line, in order; a bad line gets an error
object and the loop goes on; blank lines are passed over; end of input or a signal ends it (exit 0)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess

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
