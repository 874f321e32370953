"""`index build --backend milvus --uri ./x.db` + `select --index milvus://./x.db` end to end on
Milvus Lite, in separate processes as a user runs them; every bad input is one line."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main

from repo_paths import EXAMPLES

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

QUERY = "How much notice is needed to end the agreement?"


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "METEORA_EDGE_BUNDLE"}
    return subprocess.run([sys.executable, "-m", "meteora_edge", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def test_build_then_select_in_separate_processes_with_the_fallback_through_milvus(tmp_path):
    built = _cli("index", "build", str(EXAMPLES / "corpus"), "--backend", "milvus", "--uri", "./x.db",
                 "--chunk-size", "40", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "into 22 chunks at milvus://./x.db?collection=x" in built.stderr
    info = json.loads(_cli("index", "info", "milvus://./x.db", cwd=tmp_path).stdout)
    assert info["chunks"] == 22 and info["collection"] == "x" and info["full_text_search"] is True
    selected = _cli("select", "--index", "milvus://./x.db", "-q", QUERY, "--k-init", "6", "--n-min", "4",
                    "--tau", "0.05", "--detail", "full", "--compact", cwd=tmp_path)
    assert selected.returncode == 0, selected.stderr
    data = json.loads(selected.stdout)
    fallback = next(p for p in data["phases"] if p["name"] == "fallback")
    assert fallback["summary"].startswith("fired") and "BM25 over the index" in fallback["summary"]
    via = [p for p in data["passages"] if p["via"] == "fallback"]
    assert via and all(p["score_name"] == "bm25" and p["scores"]["bm25"] > 0 for p in via)
    assert all(p["source"].endswith(".md") and p["start_pos"] is not None for p in data["passages"])


def test_select_refuses_an_unreachable_server_in_one_line(tmp_path):
    result = _cli("select", "--index", "milvus://127.0.0.1:1", "-q", "x", cwd=tmp_path)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if not line.startswith("note: ")]
    assert lines == ["Error: cannot connect to Milvus at http://127.0.0.1:1: Fail connecting to server on "
                     "127.0.0.1:1, illegal connection params or server unavailable"]


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("args, message", [
    (["index", "build", "DOCS", "--backend", "milvus", "--uri", "corpus.sqlite"], "must be a path whose name ends in .db"),
    (["index", "build", "DOCS", "--backend", "milvus", "--uri", "grpc://h:1"], "give a Milvus Lite path"),
    (["index", "build", "DOCS", "--backend", "milvus", "--out", "ix"], "needs --uri"),
    (["index", "build", "DOCS", "--backend", "milvus", "--uri", "TMP/x.db", "--ann", "ivf"], "Milvus indexes its"),
    (["index", "build", "DOCS", "--backend", "milvus", "--uri", "TMP/x.db", "--collection", "1-2"], "not valid"),
    (["index", "build", "DOCS", "--uri", "TMP/x.db"], "a local index needs --out"),
    (["index", "build", "DOCS", "--backend", "milvus", "--uri", "TMP/no/such/x.db"], "does not exist"),
    (["index", "info", "milvus://nowhere"], "names neither a Milvus Lite database"),
    (["index", "info", "milvus://TMP/missing.db"], "missing.db does not exist; build one with"),
    (["select", "--index", "milvus://TMP/y.db?collection=no-pe", "-q", "x"], "not valid"),
    (["select", "--index", "milvus://TMP/y.db", "-q", "x"], "y.db does not exist; build one with"),
])
def test_bad_milvus_inputs_are_one_line(tmp_path, args, message):
    mapping = {"DOCS": str(EXAMPLES / "corpus"), "TMP": str(tmp_path)}
    result = _run(*[a.replace("TMP", str(tmp_path)) if a.startswith(("TMP", "milvus://TMP")) else mapping.get(a, a)
                    for a in args])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert "Traceback" not in result.output


def test_add_skips_known_documents_and_a_missing_extra_is_one_line(tmp_path, monkeypatch):
    db = str(tmp_path / "c.db")
    assert _run("index", "build", str(EXAMPLES / "corpus"), "--backend", "milvus", "--uri", db).exit_code == 0
    bundle_free = _run("index", "add", f"milvus://{db}", str(EXAMPLES / "contract.md"))
    assert bundle_free.exit_code == 0 and "added 0 chunks" in bundle_free.output
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    missing = _run("select", "--index", f"milvus://{db}", "-q", "x")
    assert missing.exit_code == 1 and 'pip install "meteora-edge[milvus]"' in missing.output


def test_serve_stdio_answers_over_a_milvus_collection_as_select_does(tmp_path):
    built = _cli("index", "build", str(EXAMPLES / "corpus"), "--backend", "milvus", "--uri", "./x.db",
                 "--chunk-size", "40", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    selected = _cli("select", "--index", "milvus://./x.db", "-q", QUERY, "--compact", cwd=tmp_path)
    assert selected.returncode == 0, selected.stderr
    env = {k: v for k, v in os.environ.items() if k != "METEORA_EDGE_BUNDLE"}
    served = subprocess.run([sys.executable, "-m", "meteora_edge", "serve", "--stdio", "--index", "milvus://./x.db"],
                            input=json.dumps({"query": QUERY}) + "\n", cwd=tmp_path, capture_output=True, text=True,
                            env=env, timeout=300)
    assert served.returncode == 0, served.stderr
    answer, expected = json.loads(served.stdout), json.loads(selected.stdout)
    assert [p["id"] for p in answer["passages"]] == [p["id"] for p in expected["passages"]]
    assert [p["text"] for p in answer["passages"]] == [p["text"] for p in expected["passages"]]
