"""dpo-prepare reads METEORA's record shapes, key names and sample-shot files."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.errors import InputError
from meteora_edge.selection.rationales import parse_rationales
from meteora_edge.training.dpo_data import prepare_preferences
from meteora_edge.training.dpo_records import meteora_record

ALL = {"train_ratio": 1.0, "validation_ratio": 0.0, "test_ratio": 0.0}
EXPLICIT = {
    "question": "Who may terminate the agreement?",
    "effective_rationales": ["[Termination] Find who may end the agreement. Flag Instructions: reject drafts",
                             "[Notice] Find the notice period."],
    "ineffective_rationales": ["[Fees] Find the fees."],
}
CANDIDATES = {
    "query": "When is rent due?",
    "rationale_candidates": [
        {"text": "[Rent] Find the rent due date.", "selected_chunks": [0, 1]},
        {"rationale": "[Pets] Find the pet policy.", "selected_indices": "3"},
        {"content": "[Late] Find late fees.", "chunk_index": 1},
        {"text": "[Parking] Find parking rules.", "selected_chunks": []},
    ],
    "correct_chunks": "1",
    "document_chunks": [{"text": "Rent is due monthly."}, {"text": "Rent is due on the first day."},
                        {"text": "Parking is free."}, {"text": "Pets need consent."}],
}


def completions(row: dict) -> tuple[list, list]:
    return (parse_rationales(row["chosen"][0]["content"]), parse_rationales(row["rejected"][0]["content"]))


def test_explicit_meteora_lists_are_one_completion_each():
    data = prepare_preferences([EXPLICIT], **ALL)
    (row,) = data.splits["train"]
    chosen, rejected = completions(row)
    assert [r.label for r in chosen] == ["Termination", "Notice"] and chosen[0].flag_instructions == "reject drafts"
    assert [r.label for r in rejected] == ["Fees"]
    assert row["query"] == "Who may terminate the agreement?"


@pytest.mark.parametrize("pref, rej", [("preferred_rationales", "rejected_rationales"),
                                        ("chosen_rationales", "dispreferred_rationales"),
                                        ("positive_rationales", "negative_rationales"),
                                        ("winning_rationales", "losing_rationales")])
def test_every_meteora_alias(pref, rej):
    record = {"input": "q?", pref: ["find a"], rej: "find b"}
    (row,) = prepare_preferences([record], **ALL).splits["train"]
    assert [r.text for r in completions(row)[0]] == ["find a"] and [r.text for r in completions(row)[1]] == ["find b"]


def test_meteora_candidates_prefer_the_gold_hitting_rationales_and_give_oracle_evidence():
    original = copy.deepcopy(CANDIDATES)
    data = prepare_preferences([CANDIDATES], oracle_evidence=True, **ALL)
    assert CANDIDATES == original  # the caller's record is untouched
    (row,) = data.splits["train"]
    chosen, rejected = completions(row)
    assert [r.label for r in chosen] == ["Rent", "Late"]  # both selected gold chunk 1
    assert [r.label for r in rejected] == ["Pets", "Parking"]
    assert "- Rent is due on the first day." in row["prompt"][-1]["content"]  # gold chunk 1's text


def test_candidates_that_all_miss_gold_give_no_pair():
    missing = {**CANDIDATES, "correct_chunks": [2]}
    hit = {**CANDIDATES, "query": "other?"}
    data = prepare_preferences([missing, hit], num_rationales=4, **ALL)
    assert data.summary["records_without_pairs"] == 1 and data.summary["pairs"]["train"] == 1


def test_our_candidate_form_accepts_meteora_key_names():
    record = {"query": "q?", "gold_chunks": [{"chunk_index": 2}],
              "candidates": [{"text": ["find x"], "selected_indices": [2]}, {"rationale": "find y", "chunk_indices": [5]}]}
    (row,) = prepare_preferences([record], **ALL).splits["train"]
    assert row["meta"]["chosen_f1"] == 1.0 and row["meta"]["rejected_f1"] == 0.0


@pytest.mark.parametrize(
    "record, message",
    [
        ({"query": "q", "rationale_candidates": "x", "gold_chunks": [1]}, "must be a list"),
        ({"query": "q", "rationale_candidates": [{"selected_chunks": [1]}], "gold_chunks": [1]}, "no 'text'"),
        ({"query": "q", "rationale_candidates": [{"text": "a", "selected_chunks": [True]}], "gold_chunks": [1]},
         "integers or strings"),
        ({"query": "q", "gold_chunks": [{"name": 1}], "candidates": [{"rationales": "a", "selected": [1]}]}, "no 'index'"),
    ],
)
def test_malformed_meteora_records_name_the_problem(record, message):
    with pytest.raises(InputError, match=message):
        prepare_preferences([record], **ALL)


def test_records_in_our_form_pass_through_unchanged():
    ours = {"query": "q", "preferred": "a", "rejected": "b"}
    assert meteora_record(ours) == ours


def test_dpo_prepare_cli_with_meteora_records_and_a_text_shot_file(tmp_path: Path):
    records = tmp_path / "examples.json"
    records.write_text(json.dumps({"examples": [EXPLICIT, CANDIDATES]}))
    shots = tmp_path / "shots.txt"
    shots.write_text("Query: When will my order arrive?\n<rationale_1>[Delivery time] Search for dispatch and delivery "
                     "timelines. Flag Instructions: Reject passages that contradict the stated deadline.</rationale_1>\n")
    out = tmp_path / "dpo"
    result = CliRunner().invoke(main, ["dpo-prepare", "--input", str(records), "--sample-shots", str(shots),
                                       "--output-dir", str(out), "--train-ratio", "1", "--validation-ratio", "0",
                                       "--test-ratio", "0", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["records_with_pairs"] == 2 and summary["pairs"]["train"] == 2
    row = json.loads((out / "train.jsonl").read_text().splitlines()[0])
    assert any("When will my order arrive?" in m["content"] for m in row["prompt"])
    assert any("[Delivery time] Search for dispatch" in m["content"] for m in row["prompt"])


def test_dpo_commands_check_their_outputs_before_reading(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    prepare = CliRunner().invoke(main, ["dpo-prepare", "--input", str(bad), "--output-dir", str(tmp_path / "no" / "dpo")])
    assert prepare.exit_code == 1 and "folder" in prepare.output and "does not exist" in prepare.output
    derive = CliRunner().invoke(main, ["dpo-derive", "--hotpot", str(bad), "--output", str(tmp_path / "no" / "c.jsonl")])
    assert derive.exit_code == 1 and "does not exist" in derive.output
