"""The budget never empties a result on its own: a default ``index build`` (200-word chunks)
with ``select --t-max 200`` returns the best chunk cut to the budget, and the trace says so.

Each 200-word chunk counts more than 200 tokens (every tenth word is longer than 16
characters and counts as several), so no chunk fits whole: before, the answer was empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.pipeline.budget import CUT_TO_FIT, WhitespaceCounter

FILLER = ["either", "party", "may", "terminate", "the", "agreement", "after", "written", "notice", "internationalisation"]


def _notes(tmp_path: Path) -> Path:
    words = [FILLER[i % len(FILLER)] for i in range(560)]  # exactly three 200-word chunks (20 words overlap)
    path = tmp_path / "notes.md"
    path.write_text(" ".join(words))
    return path


def _select(index: Path, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["select", "--index", str(index), "--query", "who may terminate the agreement",
                                       "--compact", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def default_index(tmp_path: Path) -> Path:
    out = tmp_path / "notes.idx"
    result = CliRunner().invoke(main, ["index", "build", str(_notes(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_default_chunks_over_a_budget_of_200_still_give_an_answer_and_the_trace_says_why(default_index):
    answer = _select(default_index, "--t-max", "200", "--trace")
    [passage] = answer["passages"]
    assert 0 < passage["tokens"] <= 200 and WhitespaceCounter().count([passage["text"]]) == [passage["tokens"]]
    summary = next(p["summary"] for p in answer["phases"] if p["name"] == "budget")
    budget = next(p for p in answer["trace"]["phases"] if p["name"] == "budget")
    assert budget["summary"] == summary and "was cut to" in summary
    assert budget["details"]["note"].startswith("every chunk is larger than t_max 200")
    chunk = next(c for c in answer["trace"]["candidates"] if c["kept"])
    assert chunk["budget"] == CUT_TO_FIT and chunk["tokens"] == passage["tokens"]
    whole = int(re.search(rf"chunk {chunk['chunk_id']} \((\d+) tokens\)", budget["details"]["note"]).group(1))
    assert whole == 280  # 180 short words and 20 "internationalisation" (5 tokens each): over the budget


def test_the_default_budget_keeps_whole_default_chunks(default_index):
    answer = _select(default_index, "--trace")  # t_max 512 with --index: two 200-word chunks fit whole
    assert answer["passages"] and all(p["tokens"] > 200 for p in answer["passages"])
    budget = next(p for p in answer["trace"]["phases"] if p["name"] == "budget")
    assert "note" not in budget["details"] and "cut to" not in budget["summary"]
