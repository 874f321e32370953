"""Per-query JSONL beside the HotpotQA layout: reading, automatic detection, errors with file and line, the round trip."""

import importlib.util
import json
import re

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import ConfigError, InputError
from meteora_edge.evaluation import build_method, data_layout, evaluate, load_hotpot, load_jsonl, load_questions

from repo_paths import EXAMPLES

HOTPOT_ITEM = {
    "question": "Which city is the tower in?", "answer": "Paris", "type": "bridge",
    "context": {"title": ["Tower", "River"], "sentences": [["The tower is in Paris.", " It is tall."], ["The Seine flows."]]},
    "supporting_facts": {"title": ["Tower"], "sent_id": [0]},
}
LINES = [
    {"query": "Who may terminate?", "candidates": ["Either party may terminate.", "Fees are monthly."], "gold": [0]},
    {"id": "q2", "query": "When are fees due?", "group": "fees", "answer": "monthly",
     "candidates": [{"id": "c1", "text": "Fees are due monthly.", "metadata": {"page": 2}}, {"id": "c2", "text": "Notice."}],
     "gold": ["c1"]},
]


def converter():
    spec = importlib.util.spec_from_file_location("convert_eval_data", EXAMPLES / "convert_eval_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_lines(tmp_path, lines, name="data.jsonl"):
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


def test_jsonl_reads_string_and_object_candidates_with_ids_or_positions(tmp_path):
    first, second = load_jsonl(write_lines(tmp_path, LINES))
    assert (first.qid, first.question, first.candidates, first.gold, first.group) == (
        "0", "Who may terminate?", ["Either party may terminate.", "Fees are monthly."], {0}, None)
    assert (second.qid, second.candidates, second.gold, second.answer, second.group) == (
        "q2", ["Fees are due monthly.", "Notice."], {0}, "monthly", "fees")


def test_the_layout_is_told_by_the_content_not_the_name(tmp_path):
    hot_list = tmp_path / "a.txt"
    hot_list.write_text(json.dumps([HOTPOT_ITEM], indent=2))
    hot_data = tmp_path / "b.data"
    hot_data.write_text(json.dumps({"data": [HOTPOT_ITEM]}, indent=2))
    one_line = write_lines(tmp_path, LINES[:1], name="c.json")
    many = write_lines(tmp_path, LINES, name="d.json")
    assert [data_layout(str(p)) for p in (hot_list, hot_data, one_line, many, tmp_path)] == [
        "hotpotqa", "hotpotqa", "jsonl", "jsonl", "beir"]
    assert load_questions(str(hot_list))[0].candidates == load_hotpot(str(hot_list))[0].candidates
    assert load_questions(str(hot_data), level="paragraph")[0].candidates == ["Tower: The tower is in Paris. It is tall.",
                                                                              "River: The Seine flows."]
    assert [q.qid for q in load_questions(many)] == ["0", "q2"]
    assert len(load_questions(many, limit=1)) == 1
    with pytest.raises(ConfigError, match="level applies to the HotpotQA layout only"):
        load_questions(many, level="sentence")
    with pytest.raises(InputError, match="does not exist"):
        data_layout(str(tmp_path / "missing.jsonl"))


GOOD = {"query": "q", "candidates": ["a", {"id": "x", "text": "b"}], "gold": [0]}


@pytest.mark.parametrize("line, message", [
    ({**GOOD, "query": "  "}, "'query' must be a non-empty string"),
    ({**GOOD, "gold": [5]}, "gold 5 is not among the candidates' ids (0, 'x')"),
    ({**GOOD, "gold": ["0"]}, "gold '0' is not among"),
    ({**GOOD, "gold": []}, "'gold' must be a non-empty list"),
    ({**GOOD, "candidates": ["a", {"id": 0, "text": "b"}]}, "candidates 0 and 1 share the id 0"),
    ({**GOOD, "candidates": []}, "'candidates' must be a non-empty list"),
    ({**GOOD, "candidates": ["a", {"id": "x", "text": 5}]}, "candidate 1 has no text"),
    ({**GOOD, "candidates": ["", {"id": "x", "text": " "}]}, "every candidate is empty"),
    ({**GOOD, "candidates": ["", "b"]}, "every gold candidate is empty"),
    ({**GOOD, "candidates": ["a", 7]}, "candidate 1 must be a string or an {id, text} object"),
    ({**GOOD, "candidates": ["a", {"id": "x", "body": "b"}]}, "candidate 1 has unknown key(s) ['body']"),
    ({k: v for k, v in GOOD.items() if k != "gold"}, "missing key 'gold'"),
    ({**GOOD, "question": "q"}, "unknown key(s) ['question']"),
    ({**GOOD, "answer": 3}, "'answer' must be a string"),
    ([1, 2], "must be a JSON object"),
    ('{"query": "q", "candidates": [', "line 2 is not valid JSON"),
])
def test_each_bad_line_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = write_lines(tmp_path, [GOOD, line])
    with pytest.raises(InputError) as info:
        load_jsonl(path)
    assert f"{path} line 2" in str(info.value) and message in str(info.value)


def test_duplicate_question_ids_name_both_lines(tmp_path):
    path = write_lines(tmp_path, [{**GOOD, "id": "a"}, "", {**GOOD, "id": "a"}])
    with pytest.raises(InputError, match=r"line 3: duplicate id 'a' \(first on line 1\)"):
        load_jsonl(path)
    with pytest.raises(InputError, match="holds no questions"):
        load_jsonl(write_lines(tmp_path, ["", " "]))


def test_hotpot_errors_name_the_file_too(tmp_path):
    path = tmp_path / "h.json"
    path.write_text(json.dumps([HOTPOT_ITEM, {**HOTPOT_ITEM, "question": ""}]))
    with pytest.raises(InputError, match=f"{path}: question 1 \\(''\\): 'question' must be"):
        load_questions(str(path))


def test_cli_reads_jsonl_and_refuses_level_split_and_index_for_a_file(tmp_path):
    path = write_lines(tmp_path, LINES)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["eval", "--data", path, "--method", "bm25:1", "--by", "group", "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["meta"]["layout"] == "jsonl" and report["methods"][0]["f1"] == 1.0
    assert [g["group"] for g in report["breakdowns"][0]["groups"]] == ["-", "fees"]
    for flags, message in ((["--level", "sentence"], "--level applies to the HotpotQA layout only"),
                           (["--split", "dev"], "--split applies to a BEIR folder only"),
                           (["--index", str(tmp_path / "ix")], "--index applies to a BEIR folder only")):
        result = CliRunner().invoke(main, ["eval", "--data", path, *flags])
        assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output
    bad = write_lines(tmp_path, [GOOD, {**GOOD, "gold": ["y"]}], name="bad.jsonl")
    result = CliRunner().invoke(main, ["eval", "--data", bad, "-o", str(tmp_path / "never.json")])
    assert result.exit_code == 1 and f"{bad} line 2: gold 'y'" in result.output and len(result.output.splitlines()) == 1
    assert not (tmp_path / "never.json").exists()


@pytest.mark.parametrize("fixture, level", [("dev_data", "sentence"), ("dev_data", "paragraph"),
                                            ("contract_dev_data", "sentence")])
def test_the_hotpot_layout_and_its_jsonl_conversion_give_the_same_numbers(request, tmp_path, fixture, level):
    dev_data = request.getfixturevalue(fixture)
    converted = tmp_path / "dev.jsonl"
    converter().main([str(dev_data), str(converted), "--layout", "jsonl", "--level", level, "--limit", "20"])
    original, copy = load_questions(str(dev_data), level=level, limit=20), load_questions(str(converted))
    assert [(q.qid, q.question, q.candidates, q.gold, q.group, q.answer) for q in original] == [
        (q.qid, q.question, q.candidates, q.gold, q.group, q.answer) for q in copy]
    enc = HashingEncoder()
    specs = ["topk-cosine:3", "bm25:2", "topk-hybrid:2", "ecse", "pipeline"]
    a = evaluate(original, {s: build_method(s, enc) for s in specs})
    b = evaluate(copy, {s: build_method(s, enc) for s in specs})
    for x, y in zip(a, b):
        assert [r["selected"] for r in x.per_question] == [r["selected"] for r in y.per_question]
        assert (x.precision, x.recall, x.f1, x.all_gold, x.tokens) == (y.precision, y.recall, y.f1, y.all_gold, y.tokens)
    assert len({round(r.f1, 6) for r in a}) > 1  # the methods differ, so equal rows mean equal inputs


def _dense_gold_view(*args):
    import subprocess
    import sys

    from repo_paths import ROOT
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "dense_gold_view.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_the_dense_gold_view_keeps_every_gold_candidate_and_samples_the_rest(tmp_path):
    """scripts/dense_gold_view.py: questions with few gold are left out; the others keep all their gold,
    in order, among at most --candidates candidates; the same seed gives the same view."""
    rows = [{"id": "many", "query": "q1", "candidates": [f"c{i}" for i in range(40)], "gold": [3, 17, 30]},
            {"id": "one", "query": "q2", "candidates": [f"d{i}" for i in range(40)], "gold": [5]}]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "view.jsonl"
    done = _dense_gold_view(data, "-o", out, "--candidates", "10")
    assert done.returncode == 0, done.stderr
    (view,) = load_jsonl(str(out))
    assert view.qid == "many" and len(view.candidates) == 10
    assert [view.candidates[i] for i in sorted(view.gold)] == ["c3", "c17", "c30"]
    assert view.candidates == sorted(view.candidates, key=lambda c: int(c[1:]))  # the original order
    again = tmp_path / "again.jsonl"
    assert _dense_gold_view(data, "-o", again, "--candidates", "10").returncode == 0
    assert again.read_text() == out.read_text()
    none = _dense_gold_view(data, "-o", tmp_path / "none.jsonl", "--min-gold", "4")
    assert none.returncode == 1 and none.stderr.strip() == "error: no question has 4 or more gold candidates"
    missing = _dense_gold_view(tmp_path / "nope.json", "-o", tmp_path / "x.jsonl")
    assert missing.returncode == 1 and "not found" in missing.stderr and "Traceback" not in missing.stderr


def test_an_empty_candidate_is_left_out_counted_and_the_rest_runs(tmp_path):
    line = {"query": "Who may terminate?", "gold": [2, "t"],
            "candidates": ["Fees are monthly.", "", "Either party may terminate.", {"id": "t", "text": "  "}, "Notice."]}
    path = write_lines(tmp_path, [LINES[0], line])
    second = load_jsonl(path)[1]
    assert second.candidates == ["Fees are monthly.", "Either party may terminate.", "Notice."]
    assert second.gold == frozenset({1}) and second.empty_skipped == (1, 3) and second.where == f"{path} line 2"
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["eval", "--data", path, "--method", "bm25:1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (f"warning: skipped 2 empty candidate(s) in 1 question(s) (first: {path} line 2: candidate 1); "
            "each question runs with the rest") in result.output
    report = json.loads(out.read_text())
    assert report["meta"]["questions"] == 2 and report["meta"]["empty_candidates_skipped"] == 2


def _chunking_eval(*args):
    import subprocess
    import sys

    from repo_paths import ROOT
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "chunking_eval.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_the_chunking_eval_scores_kept_characters_against_the_gold_sentences(tmp_path):
    """scripts/chunking_eval.py: with fixed windows the gold sentence is cut across two chunks and one kept
    chunk holds only part of it; at text boundaries the sentence stays whole, so top-1 keeps all of it."""
    filler = " ".join(f"Clause {i} sets out paperwork item number {i} in plain words." for i in range(1, 3))
    filler += " Clause 3 sets out item number 3 plainly."  # 28 words: a 35-word window cuts the next sentence
    item = {"question": "How much notice ends the agreement?", "answer": "90 days",
            "context": {"title": ["contract"],
                        "sentences": [[filler, "Either party may end the whole agreement on ninety days prior written notice.",
                                       "Fees are paid monthly by the client."]]},
            "supporting_facts": {"title": ["contract"], "sent_id": [1]}}
    data = tmp_path / "one.json"
    data.write_text(json.dumps([item]))
    done = _chunking_eval(data, "--chunking", "words:35,text:35", "--method", "topk-hybrid:1")
    assert done.returncode == 0, done.stderr
    recall = dict(re.findall(r"^(\w+):35 .*\n.*\n  topk-hybrid:1 +[\d.]+ +([\d.]+)", done.stdout, re.M))
    assert float(recall["text"]) == 1.0 > float(recall["words"]), done.stdout
    bad = _chunking_eval(data, "--chunking", "lines:35")
    assert bad.returncode == 1 and bad.stderr.startswith("Error: --chunking 'lines:35'") and "Traceback" not in bad.stderr
    missing = _chunking_eval(tmp_path / "nope.json")
    assert missing.returncode == 1 and missing.stderr.startswith("Error: ") and "Traceback" not in missing.stderr
