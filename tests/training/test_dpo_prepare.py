"""dpo-derive and dpo-prepare: real records from the HotpotQA dev data, the labelling and
pairing rules, split sizes, determinism, and one-line errors that leave no files behind."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.training.dpo_data import _split_sizes, label_candidates, prepare_preferences
from meteora_edge.training.dpo_derive import CANDIDATE_NAMES, candidate_rationales, derive_candidates
from meteora_edge.errors import ConfigError, InputError
from meteora_edge.selection.rationales import parse_rationales

from repo_paths import DEV_DATA as DEV, ROOT, require_dev_data

needs_dev = pytest.mark.usefixtures("dev_data")


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> Path:
    require_dev_data()
    out = tmp_path_factory.mktemp("derive") / "candidates.jsonl"
    result = CliRunner().invoke(main, ["dpo-derive", "--hotpot", str(DEV), "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


# -- derivation on the real dev data -----------------------------------------------------


@needs_dev
def test_derive_labels_every_dev_question(derived):
    records = rows(derived)
    assert len(records) == 50
    for record in records:
        assert record["gold"] and all(0 <= g < len(record["chunks"]) for g in record["gold"])
        names = [c["name"] for c in record["candidates"]]
        assert names[0] == "question" and set(names) <= set(CANDIDATE_NAMES)
        for candidate in record["candidates"]:
            assert 1 <= len(candidate["rationales"]) <= 3
            assert candidate["selected"] == sorted(set(candidate["selected"]))
            assert all(0 <= i < len(record["chunks"]) for i in candidate["selected"])
    assert records[0]["candidates"][0]["rationales"] == [records[0]["query"]]
    assert derive_candidates(DEV, limit=3) == records[:3]  # the library is the command, and deterministic


def test_candidate_sets_are_deterministic_and_named():
    sets = candidate_rationales("Were Ed Wood and Scott Derrickson of the same nationality?",
                                ["Ed Wood", "Scott Derrickson"], ["Tyler Bates", "Doctor Strange"])
    assert list(sets) == [n for n in CANDIDATE_NAMES if n in sets]
    assert sets["support"] == ["[Ed Wood] Ed Wood: Scott Derrickson nationality",
                               "[Scott Derrickson] Scott Derrickson: Ed Wood nationality"]
    assert sets["distractor+question"][-1] == "[Question] Were Ed Wood and Scott Derrickson of the same nationality?"
    assert sets["phrases"] == ["[Ed Wood] Ed Wood", "[Scott Derrickson] Scott Derrickson"]
    assert candidate_rationales("Were Ed Wood and Scott Derrickson of the same nationality?",
                                ["Ed Wood", "Scott Derrickson"], ["Tyler Bates", "Doctor Strange"]) == sets


# -- prepare on the derived records ------------------------------------------------------


@needs_dev
def test_prepare_on_dev_records_writes_splits_with_the_generator_prompt(derived, tmp_path):
    out = tmp_path / "dpo"
    result = run("dpo-prepare", "--input", str(derived), "--output-dir", str(out), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    splits = {name: rows(out / f"{name}.jsonl") for name in ("train", "validation", "test")}
    assert summary["pairs"] == {name: len(r) for name, r in splits.items()}
    assert sum(summary["records_per_split"].values()) == summary["records_with_pairs"] >= 40
    assert summary["records_per_split"]["validation"] == summary["records_per_split"]["test"] >= 4
    queries = {name: {r["query"] for r in split} for name, split in splits.items()}
    assert not (queries["train"] & queries["validation"] or queries["train"] & queries["test"] or queries["validation"] & queries["test"])
    for row in splits["train"]:
        prompt = row["prompt"]
        assert prompt[0]["role"] == "system" and "exactly 3 rationale(s)" in prompt[0]["content"]
        assert [m["role"] for m in prompt[1:]] == ["user", "assistant"] * 3 + ["user"]
        assert prompt[-1]["content"] == f"Query: {row['query']}\nRationales:"
        chosen, rejected = row["chosen"][0]["content"], row["rejected"][0]["content"]
        assert chosen.startswith("<rationale_1>") and chosen != rejected
        assert 1 <= len(parse_rationales(chosen)) <= 3
        meta = row["meta"]
        assert meta["chosen_f1"] > 0 and (meta["rejected_f1"] == 0 or meta["rejected_f1"] <= meta["chosen_f1"] - 0.2)


@needs_dev
def test_prepare_is_deterministic_for_a_seed(derived, tmp_path):
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        assert run("dpo-prepare", "--input", str(derived), "--output-dir", str(tmp_path / name), "--seed", seed).exit_code == 0
    for split in ("train.jsonl", "validation.jsonl", "test.jsonl", "dpo_prepare.json"):
        assert (tmp_path / "a" / split).read_bytes() == (tmp_path / "b" / split).read_bytes()
    assert (tmp_path / "a" / "test.jsonl").read_bytes() != (tmp_path / "c" / "test.jsonl").read_bytes()


@needs_dev
def test_oracle_evidence_lists_the_gold_sentences(derived):
    records = [json.loads(line) for line in derived.read_text().splitlines()][:5]
    data = prepare_preferences(records, oracle_evidence=True, train_ratio=1.0, validation_ratio=0.0, test_ratio=0.0)
    row = data.splits["train"][0]
    record = next(r for r in records if r["query"] == row["query"])
    last = row["prompt"][-1]["content"]
    assert last.startswith("Evidence:\n- ") and last.endswith(f"Query: {row['query']}\nRationales:")
    for g in record["gold"]:
        assert record["chunks"][g] in last


# -- the rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "selected, margin, preferred, rejected",
    [
        ([[1, 2], [1], [5], [1, 5, 6, 7]], 0.2, [0], [2, 3, 1]),  # F1 1.0, .67, 0, .33; worst first
        ([[1, 2], [1], [5], [1, 5, 6, 7]], 0.4, [0], [2, 3]),     # .67 is within the margin
        ([[1], [2], [5]], 0.2, [0, 1], [2]),                      # ties for best are all preferred
        ([[1, 3, 4, 5, 6], [2, 7, 8, 9]], 0.9, [1], []),          # .29 vs .33: both hit, within the margin
        ([[5], [6]], 0.2, [], []),                                # nothing hits gold: no pairs
        ([[1, 2], [1, 2]], 0.2, [0, 1], []),                      # nothing to reject
    ],
)
def test_labelling_rule(selected, margin, preferred, rejected):
    candidates = [{"selected": s} for s in selected]
    got_preferred, got_rejected, _ = label_candidates(candidates, [1, 2], min_margin=margin)
    assert (got_preferred, got_rejected) == (preferred, rejected)


def test_pairing_cycles_through_both_sides_and_respects_the_cap():
    record = {"query": "q", "preferred": ["[A] a", "[B] b"], "rejected": ["[C] c", "[D] d", "[E] e"]}
    data = prepare_preferences([record], train_ratio=1, validation_ratio=0, test_ratio=0)
    pairs = [(r["meta"]["chosen"], r["meta"]["rejected"]) for r in data.splits["train"]]
    assert pairs == [("preferred[0]", "rejected[0]"), ("preferred[1]", "rejected[1]"), ("preferred[0]", "rejected[2]")]
    capped = prepare_preferences([record], max_pairs_per_query=2, train_ratio=1, validation_ratio=0, test_ratio=0)
    assert len(capped.splits["train"]) == 2


def test_flag_instructions_follow_the_generator_setting():
    record = {"query": "q", "preferred": "[A] a Flag Instructions: reject b", "rejected": "[C] c"}
    kept = prepare_preferences([record], train_ratio=1, validation_ratio=0, test_ratio=0).splits["train"][0]
    dropped = prepare_preferences([record], include_flag_instructions=False, train_ratio=1, validation_ratio=0,
                                  test_ratio=0).splits["train"][0]
    assert kept["chosen"][0]["content"] == "<rationale_1>[A] a Flag Instructions: reject b</rationale_1>"
    assert dropped["chosen"][0]["content"] == "<rationale_1>[A] a</rationale_1>"
    assert "Flag Instructions" not in dropped["prompt"][0]["content"]


def test_records_are_not_modified():
    record = {"query": "q", "candidates": [{"rationales": "[A] a", "selected": [1]}, {"rationales": ["b"], "selected": [3]}],
              "gold": [1]}
    before = json.dumps(record, sort_keys=True)
    prepare_preferences([record], train_ratio=1, validation_ratio=0, test_ratio=0)
    assert json.dumps(record, sort_keys=True) == before


@pytest.mark.parametrize(
    "n, ratios, sizes",
    [
        (10, (0.8, 0.1, 0.1), (8, 1, 1)),
        (43, (0.8, 0.1, 0.1), (35, 4, 4)),
        (7, (0.5, 0.25, 0.25), (3, 2, 2)),
        (1, (0.8, 0.1, 0.1), (1, 0, 0)),
        (5, (1.0, 0.0, 0.0), (5, 0, 0)),
    ],
)
def test_split_sizes(n, ratios, sizes):
    got = _split_sizes(n, dict(zip(("train", "validation", "test"), ratios)))
    assert (got["train"], got["validation"], got["test"]) == sizes


@pytest.mark.parametrize("ratios", [(0.5, 0.1, 0.1), (0.8, 0.3, -0.1), (0.0, 0.5, 0.5), (1.2, -0.1, -0.1)])
def test_bad_ratios_raise(ratios):
    with pytest.raises(ConfigError):
        prepare_preferences([{"query": "q", "preferred": "a", "rejected": "b"}],
                            train_ratio=ratios[0], validation_ratio=ratios[1], test_ratio=ratios[2])


def test_library_errors_name_the_record():
    with pytest.raises(InputError, match=r"record 1 \('second'\): missing key 'rejected'"):
        prepare_preferences([{"query": "first", "preferred": "a", "rejected": "b"}, {"query": "second", "preferred": "a"}])


# -- CLI errors: one line, non-zero exit, no traceback, no files -------------------------

_VALID = {"query": "who may terminate", "preferred": "[A] a", "rejected": "[B] b"}


@pytest.mark.parametrize(
    "content, extra, message",
    [
        ('{"query": "q", "preferred": "a"}', [], "missing key 'rejected'"),
        ('{"preferred": "a", "rejected": "b"}', [], "missing or empty key 'query'"),
        ('{"query": "q", "preferred": [], "rejected": "b"}', [], "'preferred' is empty"),
        ('{"query": "q", "preferred": "a", "rejected": "a"}', [], "no preference pair is left"),
        ('{"query": "q", "candidates": [{"rationales": "a", "selected": [1]}]}', [], "missing key 'gold'"),
        ('{"query": "q", "candidates": [{"rationales": "a"}], "gold": [1]}', [], "needs keys 'rationales' and 'selected'"),
        ('{"query": "q", "candidates": [{"rationales": "a", "selected": [2]}, {"rationales": "b", "selected": [3]}], "gold": [1]}',
         [], "no preference pairs"),
        ('{"query": "q", "preferred": "1. a\\n2. b\\n3. c\\n4. d", "rejected": "b"}', [], "more than num_rationales=3"),
        ('{"query": "q", "preferred": "a", "rejected": "b", "candidates": []}', [], "give one form"),
        ('{"query": "q", "preferred": "a"', [], "not valid JSON"),
        ('{"query": "q", "preferred": "a", "rejected": "b"}\n{"query": ', [], "line 2 is not valid JSON"),
        ('[1, 2]', [], "record 0 is a int"),
        ("", [], "is empty"),
        ("[]", [], "holds no records"),
        (json.dumps(_VALID), ["--train-ratio", "0.5"], "must sum to 1"),
        (json.dumps(_VALID), ["--test-ratio", "-0.1", "--train-ratio", "1.0"], "test ratio must be a number in 0..1"),
        (json.dumps(_VALID), ["--oracle-evidence"], "oracle evidence needs"),
        (json.dumps(_VALID), ["--min-margin", "0"], "min_margin must be in (0, 1]"),
    ],
)
def test_cli_errors_are_one_line_and_write_nothing(tmp_path, content, extra, message):
    source = tmp_path / "records.jsonl"
    source.write_text(content)
    out = tmp_path / "out"
    result = run("dpo-prepare", "--input", str(source), "--output-dir", str(out), *extra)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_cli_error_for_missing_input_and_bad_shots(tmp_path):
    source = tmp_path / "records.jsonl"
    source.write_text(json.dumps(_VALID))
    shots = tmp_path / "shots.json"
    shots.write_text('[{"query": "x"}]')
    cases = [
        (["--input", str(tmp_path / "nope.jsonl")], "file not found"),
        (["--input", str(source), "--sample-shots", str(shots)], "sample shot 0 needs at least one rationale"),
        (["--input", str(source), "--num-rationales", "0"], "num_rationales must be an integer in 1..20"),
    ]
    for args, message in cases:
        result = run("dpo-prepare", *args, "--output-dir", str(tmp_path / "out"))
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output
        assert not (tmp_path / "out").exists()


def test_cli_rewrites_an_existing_folder_whole(tmp_path):
    source = tmp_path / "records.json"
    source.write_text(json.dumps({"records": [_VALID, {**_VALID, "query": "who pays"}]}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.jsonl").write_text("stale\n")
    result = run("dpo-prepare", "--input", str(source), "--output-dir", str(out))
    assert result.exit_code == 0, result.output
    assert "train 2, validation 0, test 0 pairs from 2 of 2 records" in result.output
    assert len(rows(out / "train.jsonl")) == 2 and not list(out.glob(".*.tmp"))


def test_derive_errors_are_one_line(tmp_path):
    bad = tmp_path / "hotpot.json"
    bad.write_text(json.dumps([{"question": "q", "answer": "a"}]))
    result = run("dpo-derive", "--hotpot", str(bad), "--output", str(tmp_path / "c.jsonl"))
    assert result.exit_code == 1 and "missing key 'context'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "c.jsonl").exists()


def test_prepare_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, meteora_edge.training.dpo_data, meteora_edge.training.dpo_files, meteora_edge.training.dpo_derive, meteora_edge.cli.dpo_commands; "
            "bad = [m for m in ('torch', 'transformers', 'trl', 'optimum') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
