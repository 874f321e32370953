"""An object that holds one key twice is refused with one line, never read last-wins: in chunk and
document files (JSON and each JSONL line), in HTTP and stdio request bodies, and in rationale files."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.errors import InputError
from meteora_edge.fileio import parse_json, read_chunks_file, read_json_or_jsonl
from meteora_edge.integrations.service import SelectService
from meteora_edge.integrations.stdio import serve_stdio

MESSAGE = "the key {key!r} appears twice in one object; give each key once (JSON readers disagree on which copy counts)"


def test_files_name_the_file_the_line_and_the_key(tmp_path):
    whole = tmp_path / "c.json"
    whole.write_text('{"chunks": [{"text": "a", "metadata": {"page": 1, "page": 2}}]}')
    with pytest.raises(InputError) as info:
        read_chunks_file(whole)
    assert str(info.value) == f"{whole} is ambiguous: " + MESSAGE.format(key="page")
    lines = tmp_path / "c.jsonl"
    lines.write_text('{"text": "a"}\n{"text": "b", "text": "c"}\n')
    with pytest.raises(InputError) as info:
        read_json_or_jsonl(lines)
    assert str(info.value) == f"{lines} line 2 is ambiguous: " + MESSAGE.format(key="text")
    assert parse_json('{"a": {"b": 1}, "b": 2}', "x") == {"a": {"b": 1}, "b": 2}  # the same key in two objects is fine


def test_select_refuses_it_in_chunk_and_rationale_files(tmp_path):
    chunks = tmp_path / "c.json"
    chunks.write_text('[{"text": "Either party may terminate.", "text": "Fees are due."}]')
    result = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "-q", "who may terminate?"])
    assert result.exit_code != 0 and result.output.strip().splitlines() == [
        f"Error: {chunks} is ambiguous: " + MESSAGE.format(key="text")]
    rationales = tmp_path / "r.json"
    rationales.write_text('{"rationales": ["a"], "rationales": ["b"]}')
    result = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "-q", "x", "--rationales", str(rationales)])
    assert result.exit_code != 0 and "appears twice" in result.output and "Traceback" not in result.output


def test_request_bodies_over_http_and_stdio():
    from starlette.testclient import TestClient

    from meteora_edge.integrations.http_server import create_app

    body = '{"query": "who may terminate?", "chunks": ["Either party may terminate."], "query": "fees?"}'
    answer = TestClient(create_app(SelectService()), base_url="http://127.0.0.1").post(
        "/v1/select", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json() == {"error": "the body is ambiguous: " + MESSAGE.format(key="query")}
    out = io.BytesIO()
    rpc = '{"jsonrpc": "2.0", "id": 3, "method": "select", "params": {"query": "x", "chunks": ["a"], "chunks": ["b"]}}'
    serve_stdio(SelectService(), io.BytesIO((body + "\n" + rpc + "\n").encode()), out)
    bare, framed = (json.loads(line) for line in out.getvalue().splitlines())
    assert bare == {"error": "the body is ambiguous: " + MESSAGE.format(key="query")}
    assert framed["error"]["message"] == "the body is ambiguous: " + MESSAGE.format(key="chunks")
