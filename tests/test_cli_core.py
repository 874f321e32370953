import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main

from repo_paths import EXAMPLES, ROOT


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_version_and_help():
    assert run("--version").output.startswith("meteora-edge, version")
    assert "select" in run("--help").output


def test_select_on_the_bundled_sample(tmp_path):
    result = run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"),
                 "--rationales", str(EXAMPLES / "contract_rationales.txt"), "--compact", "--trace")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["selected_indices"] and data["selected_indices"] == sorted(data["selected_indices"])
    assert len(data["rationales"]) == 3
    assert data["rationales"][0]["flag_instructions"].startswith("reject draft notes")
    assert sorted(p["id"] for p in data["passages"]) == data["selected_indices"]
    clauses = json.loads((EXAMPLES / "contract_clauses.json").read_text())["chunks"]
    for passage in data["passages"]:  # each passage keeps its input object's metadata
        assert passage["metadata"] == clauses[passage["id"]]["metadata"]
        assert passage["text"] == clauses[passage["id"]]["text"]


@pytest.mark.parametrize("layout", ["list", "object", "jsonl"])
def test_select_reads_every_chunk_layout(tmp_path, layout):
    chunks = [{"text": "fees are due monthly"}, "either party may terminate", {"page_content": "governing law"}]
    path = tmp_path / "chunks.json"
    if layout == "list":
        path.write_text(json.dumps(chunks))
    elif layout == "object":
        path.write_text(json.dumps({"chunks": chunks}))
    else:
        path.write_text("\n".join(json.dumps(c) for c in chunks) + "\n")
    out = tmp_path / "out.json"
    result = run("select", "--chunks", str(path), "--query", "who may terminate", "--expansion-window", "0",
                 "--output", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert 1 in [p["id"] for p in data["passages"]]
    # no rationale and no LLM: rationales are written by rule, the question being the first
    assert data["rationale_source"] == "auto"
    assert data["rationales"][0] == {"index": 1, "label": "question", "text": "who may terminate", "flag_instructions": None}


def test_query_is_added_to_given_rationales_on_request(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(["a b", "c d"]))
    data = json.loads(run("select", "--chunks", str(path), "-q", "c", "--rationale", "a",
                          "--use-query-as-rationale").stdout)
    assert [r["text"] for r in data["rationales"]] == ["a", "c"]


BAD_CASES = {
    "missing file": (None, ["--query", "x"], "file not found"),
    "malformed json": ("[{\"text\": 1,", ["--query", "x"], "not valid JSON"),
    "chunk without text": ("[{\"title\": \"x\"}]", ["--query", "x"], "without a text"),
    "non-string text": ("[{\"text\": 5}]", ["--query", "x"], "must be a string"),
    "empty list": ("[]", ["--query", "x"], "holds no chunks"),
    "empty file": ("", ["--query", "x"], "is empty"),
    "empty chunk": ("[\"a\", \"  \"]", ["--query", "x"], "empty text"),
    "no rationale no query": ("[\"a\"]", [], "no rationale and no query"),
    "wrong top-level type": ("{\"items\": []}", ["--query", "x"], "without a 'chunks' key"),
    "scalar json": ("42", ["--query", "x"], "of type int has no text"),
    "object chunks not a list": ("{\"chunks\": 3}", ["--query", "x"], "must be a list"),
    "bad jsonl line": ("{\"text\": \"a\"}\n{oops}\n", ["--query", "x"], "line 2"),
    "missing rationales file": ("[\"a\"]", ["--rationales", "/nonexistent/r.txt"], "file not found"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_gives_one_line_error_and_no_output(tmp_path, case):
    content, extra, message = BAD_CASES[case]
    path = tmp_path / "chunks.json"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "out.json"
    result = run("select", "--chunks", str(path), *extra, "--output", str(out))
    assert result.exit_code != 0
    lines = [l for l in result.output.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not out.exists()
    assert list(tmp_path.glob(".out.json.*")) == []


def test_negative_window_is_a_usage_error(tmp_path):
    result = run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "x",
                 "--expansion-window", "-1")
    assert result.exit_code == 2 and "-1 is not in the range" in result.output


def test_chunk_command_keeps_offsets(tmp_path):
    out = tmp_path / "chunks.json"
    result = run("chunk", str(EXAMPLES / "contract.md"), "--chunk-size", "40", "--overlap", "5", "-o", str(out))
    assert result.exit_code == 0, result.output
    source = (EXAMPLES / "contract.md").read_text()
    chunks = json.loads(out.read_text())["chunks"]
    assert len(chunks) > 3
    for c in chunks:
        assert source[c["start_pos"] : c["end_pos"]] == c["text"]
        assert c["metadata"] == {"source": "contract.md"}
    # the chunk output feeds select directly
    sel = run("select", "--chunks", str(out), "-q", "termination notice", "--compact")
    assert sel.exit_code == 0
    passages = json.loads(sel.stdout)["passages"]
    assert passages and all(p["source"] == "contract.md" for p in passages)
    for p in passages:  # offsets come through, and point into the source
        assert source[p["start_pos"]:p["end_pos"]] == p["text"]


@pytest.mark.parametrize("args, message", [
    (["chunk", "/nope.md"], "file not found"),
    (["chunk", "EMPTY"], "holds no words"),
    (["chunk", "EXAMPLE", "--chunk-size", "5", "--overlap", "5"], "overlap"),
])
def test_chunk_bad_inputs(tmp_path, args, message):
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    args = [str(empty) if a == "EMPTY" else str(EXAMPLES / "contract.md") if a == "EXAMPLE" else a for a in args]
    result = run(*args)
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def test_output_to_missing_folder_is_a_clean_error(tmp_path):
    result = run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "x",
                 "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert result.exit_code == 1 and "does not exist" in result.output


def test_console_script_runs_without_torch_in_a_subprocess():
    code = (
        "import sys, runpy;"
        "sys.argv=['meteora-edge','select','--chunks',%r,'--rationales',%r,'--compact'];"
        "from meteora_edge.cli.main import main\n"
        "try:\n main()\nexcept SystemExit as e:\n assert e.code in (0, None), e.code\n"
        "bad=[m for m in ('torch','transformers','optimum','sentence_transformers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    ) % (str(EXAMPLES / "contract_clauses.json"), str(EXAMPLES / "contract_rationales.txt"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["passages"]


def test_a_new_output_file_is_owner_only_and_an_old_one_keeps_its_mode(tmp_path):
    out = tmp_path / "sel.json"
    run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "x", "-o", str(out))
    assert out.stat().st_mode & 0o777 == 0o600  # the passages are the user's: no other local user reads them
    out.chmod(0o644)  # the user opened it up: a rewrite keeps that
    run("select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "y", "-o", str(out))
    assert out.stat().st_mode & 0o777 == 0o644 and json.loads(out.read_text())["passages"]


def _current_umask() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    return 0o022


def test_select_scoring_and_rationale_strategy_options(tmp_path):
    chunks = tmp_path / "c.json"
    chunks.write_text(json.dumps(["fees are due monthly", "either party may terminate", "governing law is England"]))
    outs = {}
    for extra in (["--scoring", "dense", "--rationales", "query"], ["--rationales", "auto"], []):
        out = tmp_path / f"o{len(outs)}.json"
        result = run("select", "--chunks", str(chunks), "-q", "who may terminate", "-o", str(out), "--trace", *extra)
        assert result.exit_code == 0, result.output
        outs[" ".join(extra)] = json.loads(out.read_text())
    dense = outs["--scoring dense --rationales query"]
    assert dense["trace"]["config"]["scoring"] == "dense" and dense["rationale_source"] == "query-fallback"
    assert outs["--rationales auto"]["rationale_source"] == "auto" == outs[""]["rationale_source"]
    assert outs[""]["trace"]["config"]["scoring"] == "hybrid"


@pytest.mark.parametrize("args, message", [
    (["--rationales", "auto", "--rationales", "query"], "not several"),
    (["--rationales", "auto", "--rationale", "fees"], "drop the other rationale options"),
    (["--scoring", "semantic"], "Invalid value for '--scoring'"),
])
def test_select_strategy_conflicts_are_one_line_errors(tmp_path, args, message):
    chunks = tmp_path / "c.json"
    chunks.write_text(json.dumps(["a b", "c d"]))
    result = run("select", "--chunks", str(chunks), "-q", "a", *args)
    assert result.exit_code != 0 and message in result.output
    assert "Traceback" not in result.output
