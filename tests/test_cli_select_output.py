"""What ``select`` prints: the concise default, the full record, four formats, passage origins,
one id space, the expansion-window default, and every input checked before any model loads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli import select_command
from meteora_edge.cli.main import main
from meteora_edge.cli.select_inputs import load_rationales
from meteora_edge.pipeline.config import default_window, is_ordered_document

from repo_paths import EXAMPLES, ROOT

CLAUSES = str(EXAMPLES / "contract_clauses.json")
RATIONALES = str(EXAMPLES / "contract_rationales.txt")
PASSAGE_KEYS = ["rank", "id", "text", "source", "document", "start_pos", "end_pos", "score", "score_name", "tokens",
                "metadata"]


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_python_m_meteora_edge_runs_the_cli():
    proc = subprocess.run([sys.executable, "-m", "meteora_edge", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: meteora-edge") and "select" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "meteora_edge", "select", "-q", "x"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.strip().startswith("Error: give exactly one of --chunks")


def test_default_output_is_concise_and_names_each_passage():
    result = run("select", "--chunks", CLAUSES, "--rationales", RATIONALES, "-q", "How can the agreement end?",
                 "--t-max", "120")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["format"], data["version"]) == ("meteora-edge.selection", 1)
    assert set(data) == {"format", "version", "query", "passages", "tokens", "phases", "rationales",
                         "rationale_source", "encoder"}
    assert [p["name"] for p in data["phases"]] == ["candidates", "selection", "verify", "fallback", "prioritise", "budget"]
    assert all(set(p) == {"name", "summary", "ms"} for p in data["phases"])
    clauses = json.loads(Path(CLAUSES).read_text())["chunks"]
    assert data["passages"] and [p["rank"] for p in data["passages"]] == list(range(1, len(data["passages"]) + 1))
    for p in data["passages"]:
        assert list(p) == PASSAGE_KEYS
        assert p["source"] == CLAUSES and p["metadata"] == clauses[p["id"]]["metadata"]
        assert p["start_pos"] is None and p["tokens"] == len(p["text"].split())
    assert sum(p["tokens"] for p in data["passages"]) == data["tokens"] <= 120
    assert len(result.stdout.splitlines()) < 120  # was ~490 lines


def test_the_hashing_fallback_is_announced_once_on_stderr():
    result = run("select", "--chunks", CLAUSES, "-q", "termination")
    assert result.stderr.count("hashing encoder") == 1 and "hashing" not in result.stdout.split('"encoder"')[0]


def test_trace_gives_the_full_record_in_one_id_space(tmp_path):
    index = tmp_path / "ix"
    assert run("index", "build", str(EXAMPLES / "corpus"), "--out", str(index), "--chunk-size", "40").exit_code == 0
    result = run("select", "--index", str(index), "-q", "How much notice is needed to end the agreement?",
                 "--k-init", "6", "--trace", "--expansion-window", "1", "--t-max", "300")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    candidates = data["trace"]["candidates"]
    chunk_ids = {c["chunk_id"] for c in candidates}
    assert {c["candidate"] for c in candidates} == set(range(len(candidates)))  # kNN ranks, named as such
    assert chunk_ids != set(range(len(candidates)))  # a real index: ids differ from ranks
    details = data["details"]
    for key in ("pairing_indices", "pooled_indices", "expansion_indices"):
        assert set(details[key]) <= chunk_ids, key
    assert {m["chunk_index"] for m in details["rationale_matches"]} <= chunk_ids
    assert {int(k) for k in details["pooled_scores"]} == chunk_ids
    selection_phase = next(p for p in data["trace"]["phases"] if p["name"] == "selection")
    assert selection_phase["details"]["ecse"]["pooled_indices"] == details["pooled_indices"]
    assert data["selected_indices"] == sorted(p["id"] for p in data["passages"])
    assert set(data["selected_indices"]) <= chunk_ids
    for p in data["passages"]:
        assert p["source"].endswith((".md", ".txt")) and p["document"] == p["source"]
        text = Path(p["source"]).read_text()
        assert text[p["start_pos"]:p["end_pos"]] == p["text"]
        assert p["via"] in ("selection", "fallback")
        if p["via"] == "selection":
            assert "retrieval" in p["scores"]
        trace_row = next(c for c in data["trace"]["candidates"] if c["chunk_id"] == p["id"])
        assert p["chosen_by"] == trace_row.get("chosen_by") and p["chosen_by"] is not None


def test_jsonl_text_and_table_formats(tmp_path):
    base = ["select", "--chunks", CLAUSES, "--rationales", RATIONALES, "-q", "termination", "--t-max", "100"]
    json_rows = json.loads(run(*base).stdout)["passages"]
    jsonl = run(*base, "--format", "jsonl")
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == json_rows
    assert "budget" in jsonl.stderr and "budget" not in jsonl.stdout
    text = run(*base, "--format", "text")
    assert text.stdout.count("\n[") + text.stdout.startswith("[") == len(json_rows)
    first = json_rows[0]
    assert text.stdout.startswith(f"[1] id {first['id']} · {CLAUSES} · score ") and first["text"] in text.stdout
    table = run(*base, "--format", "table")
    assert f"{len(json_rows)} passages" in table.stdout and "prioritise" in table.stdout
    out = tmp_path / "sel.txt"
    written = run(*base, "--format", "text", "-o", str(out))
    assert written.exit_code == 0 and out.read_text() == text.stdout and "wrote" in written.stderr


@pytest.mark.parametrize("args, message", [
    (["--format", "json", "--table"], "--table conflicts with --format json"),
    (["--trace", "--detail", "summary"], "--trace asks for the full record"),
    (["-o", "/no/such/folder/out.json"], "folder /no/such/folder does not exist"),
    (["--sample-shots", "shots.json"], "add --generate-rationales or --verify"),
])
def test_output_choices_are_checked_first(args, message):
    result = CliRunner().invoke(main, ["select", "--chunks", CLAUSES, "-q", "x", *args])
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output


def test_check_output_path_refuses_a_folder(tmp_path):
    from meteora_edge.cli.output import check_output_path
    from meteora_edge.errors import InputError

    with pytest.raises(InputError, match="is a folder"):
        check_output_path(str(tmp_path), option="--plot")
    check_output_path(str(tmp_path / "new.json"))  # a new file in an existing folder is fine


def test_inputs_are_checked_before_any_model_loads(monkeypatch, tmp_path):
    loaded: list[str] = []
    monkeypatch.setattr(select_command.SelectRuntime, "load", lambda *a, **k: loaded.append("models"))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    cases = [
        (["--index", str(tmp_path / "no-index")], "index folder not found"),
        (["--chunks", CLAUSES, "--tokenizer", str(tmp_path / "tok.json")], "tokenizer not found"),
        (["--chunks", CLAUSES, "--rationales", str(tmp_path / "r.txt")], "file not found"),
        (["--chunks", CLAUSES, "-o", str(tmp_path / "no" / "out.json")], "does not exist"),
        (["--chunks", CLAUSES, "--sample-shots", str(tmp_path / "s.json"), "--verify"], "file not found"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, ["select", "-q", "who may terminate?", "--bundle", str(bundle), "--verify",
                                           *args])
        assert result.exit_code == 1 and message in result.output, (args, result.output)
    assert loaded == []


def test_a_tagged_rationale_file_starting_with_a_label(tmp_path):
    tagged = tmp_path / "rationales.txt"
    tagged.write_text("[Termination] Find who may end the agreement. Flag Instructions: reject drafts\n"
                      "[Renewal] Find how it renews.\n")
    response = tmp_path / "r.json"
    response.write_text(json.dumps({"response": "<rationale_1>[Fees] Find the fees.</rationale_1>"}))
    assert [r.label for r in load_rationales(str(tagged))] == ["Termination", "Renewal"]
    assert load_rationales(str(tagged))[0].flag_instructions == "reject drafts"
    assert [r.label for r in load_rationales(str(response))] == ["Fees"]
    result = run("select", "--chunks", CLAUSES, "--rationales", str(tagged))
    assert result.exit_code == 0, result.output
    assert [r["label"] for r in json.loads(result.stdout)["rationales"]] == ["Termination", "Renewal"]


def test_expansion_window_default_follows_the_chunks(tmp_path):
    document = tmp_path / "doc.json"
    assert run("chunk", str(EXAMPLES / "contract.md"), "--chunk-size", "30", "-o", str(document)).exit_code == 0
    ordered = json.loads(document.read_text())["chunks"]
    assert is_ordered_document(ordered) and default_window(ordered) == 1
    clauses = json.loads(Path(CLAUSES).read_text())["chunks"]
    assert not is_ordered_document(clauses) and default_window(clauses) == 0
    shuffled = [ordered[2], ordered[0], ordered[1]]
    two_sources = [{**ordered[0], "metadata": {"source": "a"}}, {**ordered[1], "metadata": {"source": "b"}}]
    assert not is_ordered_document(shuffled) and not is_ordered_document(two_sources)
    assert default_window(None) == 0 and not is_ordered_document(["a", "b"])

    def window(*args: str) -> int:
        out = run("select", "-q", "termination notice", "--trace", *args)
        return json.loads(out.stdout)["trace"]["config"]["expansion_window"]

    assert window("--chunks", str(document)) == 1
    assert window("--chunks", CLAUSES) == 0
    assert window("--chunks", CLAUSES, "--expansion-window", "2") == 2
    assert "ordered document" in run("select", "--help").stdout


def test_the_table_tells_files_of_one_name_apart_by_their_folder(tmp_path):
    """A folder of packages holds many a ``copyright``: the table shows ``curl/copyright``, not the name alone;
    a folder and name too long for the column fall back to the name, and JSON keeps the whole path."""
    root = tmp_path / "usr" / "share" / "doc"
    long_folder = "a-package-with-a-very-long-name"
    texts = ["The licence lets anyone copy the files.", "Anyone may change the files under the licence.",
             "Copies and changed files keep this licence."]
    chunks = [{"text": text, "source": str(root / name / "copyright"), "start_pos": 0, "end_pos": 50}
              for text, name in zip(texts, ("curl", "git", long_folder))]
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(chunks))
    result = run("select", "--chunks", str(path), "-q", "licence copy change files", "--format", "table", "--no-ecse")
    assert result.exit_code == 0, result.output
    shown = [line.split()[4] for line in result.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]
    assert sorted(shown) == ["copyright:0-50", "curl/copyright:0-50", "git/copyright:0-50"], result.stdout
    as_json = json.loads(run("select", "--chunks", str(path), "-q", "licence copy change files", "--no-ecse").stdout)
    assert {p["source"] for p in as_json["passages"]} == {c["source"] for c in chunks}
