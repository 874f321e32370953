import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main

from repo_paths import EXAMPLES


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def index_dir(tmp_path):
    out = tmp_path / "ix"
    result = run("index", "build", str(EXAMPLES / "contract.md"), str(EXAMPLES / "contract_clauses.json"),
                 "--out", str(out), "--chunk-size", "30")
    assert result.exit_code == 0, result.output
    return out


def test_index_info_add_and_select(index_dir, tmp_path):
    info = json.loads(run("index", "info", str(index_dir)).output)
    assert info["encoder"]["id"] == "hashing:384" and info["chunks"] > 10
    extra = tmp_path / "extra.txt"
    extra.write_text("Force majeure: neither party is liable for delays caused by events beyond its control.")
    assert run("index", "add", str(index_dir), str(extra)).exit_code == 0
    assert json.loads(run("index", "info", str(index_dir)).output)["chunks"] == info["chunks"] + 1
    result = run("select", "--index", str(index_dir), "-q", "force majeure delays beyond control", "--t-max", "60",
                 "--compact")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["tokens"] <= 60 and data["passages"]
    assert [p["name"] for p in data["phases"]] == [
        "candidates", "selection", "verify", "fallback", "prioritise", "budget"]
    assert "trace" not in data  # the default is the concise record
    force = next(p for p in data["passages"] if "Force majeure" in p["text"])
    assert force["source"] == str(extra) and force["metadata"] == {"source": str(extra)}
    assert extra.read_text()[force["start_pos"]:force["end_pos"]] == force["text"]
    assert sum(p["tokens"] for p in data["passages"]) == data["tokens"]


def test_table_output(index_dir):
    result = run("select", "--index", str(index_dir), "-q", "termination notice", "--table")
    assert result.exit_code == 0
    assert "candidates" in result.stdout and re.search(r"\n\d+ passages?, \d+ tokens\n", result.stdout)
    assert "contract" in result.stdout
    full = run("select", "--index", str(index_dir), "-q", "termination notice", "--table", "--trace")
    assert full.exit_code == 0 and "context:" in full.stdout and "verdict" in full.stdout


def test_chunks_mode_adds_only_the_phases_asked_for():
    base = ["select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "termination notice", "--compact",
            "--trace"]
    plain = json.loads(run(*base).stdout)
    assert plain["trace"]["config"]["rung"] == "none" and plain["trace"]["config"]["t_max"] is None
    budgeted = json.loads(run(*base, "--t-max", "30", "--theta", "0.9").stdout)
    assert budgeted["tokens"] <= 30
    assert set(budgeted["selected_indices"]) <= set(plain["selected_indices"])


def test_cover_z_sets_or_turns_off_the_term_cover():
    base = ["select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "termination notice", "--compact",
            "--trace"]

    def cut(*extra):
        out = json.loads(run(*base, *extra).stdout)
        assert out["trace"]["config"]["cover_z"] == (None if "off" in extra else float(extra[-1]) if extra else 0.5)
        return [p for p in out["trace"]["phases"] if p["name"] == "selection"][0]["details"]["ecse"]["cut"]

    assert cut()["cover_z"] == 0.5 and "covering" in cut()
    assert cut("--cover-z", "1.5")["cover_z"] == 1.5
    assert cut("--cover-z", "off") is None
    bad = run(*base, "--cover-z", "lots")
    assert bad.exit_code == 2 and "'lots' is neither a number nor 'off'" in bad.output


def test_token_cover_sets_or_turns_off_the_token_cover_and_refuses_a_share_outside_0_1():
    base = ["select", "--chunks", str(EXAMPLES / "contract_clauses.json"), "-q", "termination notice", "--compact",
            "--trace", "--tau", "0.1"]

    def cover(*extra):
        out = json.loads(run(*base, *extra).stdout)
        verify = [p for p in out["trace"]["phases"] if p["name"] == "verify"][0]["details"]
        return out["trace"]["config"]["token_cover"], verify["token_cover"]

    default = cover()
    assert default[0] == 0.05 and default[1]["skipped"] == "the encoder gives no word-piece vectors"  # hashing
    assert cover("--token-cover", "0.2")[0] == 0.2
    assert cover("--token-cover", "off") == (None, {"min_gain": None})
    bad = run(*base, "--token-cover", "lots")
    assert bad.exit_code == 2 and "'lots' is neither a number nor 'off'" in bad.output
    outside = run(*base, "--token-cover", "2")
    assert outside.exit_code == 1 and "token_cover" in outside.output and "Traceback" not in outside.output


@pytest.mark.parametrize("args, message", [
    (["select", "-q", "x"], "exactly one of --chunks"),
    (["select", "--index", "IDX"], "needs a non-empty --query"),
    (["select", "--index", "/no/such/index", "-q", "x"], "index folder not found"),
    (["select", "--index", "IDX", "-q", "x", "--verification", "llm"], "needs a verifier"),
    (["select", "--index", "IDX", "-q", "x", "--tokenizer", "/no/tok.json"], "tokenizer not found"),
    (["index", "build", "/no/such.md", "--out", "OUT"], "file not found"),
    (["index", "info", "/no/such/index"], "index folder not found"),
    (["index", "build", "EMPTY", "--out", "OUT"], "no text to index"),
])
def test_bad_pipeline_inputs(index_dir, tmp_path, args, message):
    empty = tmp_path / "empty.txt"
    empty.write_text("   ")
    mapping = {"IDX": str(index_dir), "OUT": str(tmp_path / "new"), "EMPTY": str(empty)}
    result = run(*[mapping.get(a, a) for a in args])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "new").exists()


def test_index_from_another_encoder_is_refused_by_select(index_dir, tmp_path):
    generation = index_dir / json.loads((index_dir / "manifest.json").read_text())["generation"]
    manifest = json.loads((generation / "manifest.json").read_text())
    manifest["encoder"]["id"] = "onnx:other"
    (generation / "manifest.json").write_text(json.dumps(manifest))
    result = run("select", "--index", str(index_dir), "-q", "x")
    assert result.exit_code == 1 and "built with encoder 'onnx:other'" in result.output
