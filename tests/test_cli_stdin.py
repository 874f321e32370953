"""``-`` reads standard input: ``select --chunks -``, ``chunk -``, ``index build -`` and ``index add -``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.index.local_index import LocalIndex

from repo_paths import EXAMPLES

CONTRACT = (EXAMPLES / "contract.md").read_text(encoding="utf-8")


def run(*args: str, stdin: str | bytes | None = None):
    return CliRunner().invoke(main, list(args), input=stdin)


def one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("note:")]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.output
    assert "Traceback" not in result.output


def test_select_reads_chunks_from_stdin_like_a_file(tmp_path):
    chunks = ["fees are due monthly", "either party may terminate with notice", "governing law is England"]
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(chunks))
    args = ("select", "--query", "who may terminate", "--expansion-window", "0", "--format", "json")
    from_file = run(*args, "--chunks", str(path))
    from_stdin = run(*args, "--chunks", "-", stdin="\n".join(json.dumps(c) for c in chunks) + "\n")  # JSONL too
    assert from_stdin.exit_code == 0, from_stdin.output
    got = json.loads(from_stdin.stdout)
    assert [p["text"] for p in got["passages"]] == [p["text"] for p in json.loads(from_file.stdout)["passages"]]
    assert "either party may terminate with notice" in [p["text"] for p in got["passages"]]


@pytest.mark.parametrize("stdin, fragment", [
    ("[1, 2", "<stdin> is not valid JSON"),
    ("", "<stdin> is empty"),
    (b"\xff\xfe[]", "<stdin> is not UTF-8"),
])
def test_select_bad_stdin_is_one_line_naming_stdin(stdin, fragment):
    one_line_error(run("select", "--query", "q", "--chunks", "-", stdin=stdin), fragment)


def test_chunk_reads_stdin_and_names_the_source(tmp_path):
    result = run("chunk", "-", "--chunk-size", "40", "--compact", stdin=CONTRACT)
    assert result.exit_code == 0, result.output
    chunks = json.loads(result.stdout)["chunks"]
    file_result = run("chunk", str(EXAMPLES / "contract.md"), "--chunk-size", "40", "--compact")
    from_file = json.loads(file_result.stdout)["chunks"]
    assert [c["text"] for c in chunks] == [c["text"] for c in from_file]
    assert {c["metadata"]["source"] for c in chunks} == {"<stdin>"}
    first = chunks[1]
    assert CONTRACT[first["start_pos"]:first["end_pos"]] == first["text"]


def test_chunk_of_an_empty_stdin_is_one_line_and_prints_nothing():
    result = run("chunk", "-", stdin="  \n ")
    one_line_error(result, "<stdin> holds no words")
    assert result.stdout.count("[") == 0


def test_index_build_and_add_from_stdin(tmp_path):
    out = tmp_path / "ix"
    built = run("index", "build", "-", "--out", str(out), "--chunk-size", "40", stdin=CONTRACT)
    assert built.exit_code == 0, built.output
    assert "1 document from 1 file" in built.output
    index = LocalIndex.load(out)
    assert {r["metadata"]["source"] for r in index.records(range(len(index)))} == {"<stdin>"}
    size = len(index)
    added = run("index", "add", str(out), "-", stdin="A late clause: the supplier shall insure the goods in transit.")
    assert added.exit_code == 0, added.output
    assert len(LocalIndex.load(out)) == size + 1
    again = run("index", "add", str(out), "-", stdin="A late clause: the supplier shall insure the goods in transit.")
    assert "1 document already in the index was left out" in again.output


def test_stdin_given_twice_is_refused(tmp_path):
    one_line_error(run("index", "build", "-", "-", "--out", str(tmp_path / "ix"), stdin="text"), "can be read once")
    assert not (tmp_path / "ix").exists()
