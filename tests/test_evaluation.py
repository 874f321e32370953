import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import ConfigError, InputError
from meteora_edge.evaluation import EvalQuestion, build_method, evaluate, load_hotpot

from repo_paths import DEV_DATA as DEV

needs_dev = pytest.mark.usefixtures("dev_data")

ITEM = {
    "question": "Which city is the tower in?",
    "answer": "Paris",
    "type": "bridge",
    "level": "easy",
    "context": {"title": ["Tower", "River"], "sentences": [["The tower is in Paris.", " It is tall."], ["The Seine flows."]]},
    "supporting_facts": {"title": ["Tower"], "sent_id": [0]},
}


def write(tmp_path, items):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(items))
    return str(path)


def test_sentence_and_paragraph_candidates_and_gold(tmp_path):
    path = write(tmp_path, [ITEM])
    (q,) = load_hotpot(path, level="sentence")
    assert q.candidates == ["Tower: The tower is in Paris.", "Tower: It is tall.", "River: The Seine flows."]
    assert q.gold == {0}
    (p,) = load_hotpot(path, level="paragraph")
    assert p.candidates[0] == "Tower: The tower is in Paris. It is tall." and p.gold == {0}


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("supporting_facts"), "missing key 'supporting_facts'"),
    (lambda d: d["supporting_facts"].update(title=["Nowhere"]), "'Nowhere' is not in its context"),
    (lambda d: d["supporting_facts"].update(sent_id=[7]), "points outside its paragraph"),
    (lambda d: d["context"]["title"].append("Extra"), "2 sentence lists"),
    (lambda d: d.update(question=""), "non-empty string"),
    (lambda d: d["context"]["sentences"].__setitem__(0, "not a list"), "list of sentence strings"),
])
def test_malformed_questions_name_the_question_and_problem(tmp_path, mutate, message):
    bad = copy.deepcopy(ITEM)
    mutate(bad)
    with pytest.raises(InputError) as info:
        load_hotpot(write(tmp_path, [ITEM, bad]))
    assert "question 1" in str(info.value) and message in str(info.value)


def test_metrics_on_a_hand_checked_case():
    q = EvalQuestion("q", "tower paris", "Paris", ["tower in paris", "it is tall", "seine flows"], frozenset({0, 1}))
    (report,) = evaluate([q], {"fixed": lambda _: [0, 2]})
    assert report.precision == 0.5 and report.recall == 0.5 and report.f1 == 0.5
    assert report.all_gold == 0.0 and report.items == 2 and report.tokens == 5
    assert report.answer_contained == 1.0 and report.answer_questions == 1


@pytest.mark.parametrize("spec", ["nope", "topk-cosine", "topk-cosine:0", "bm25:x", "ecse-window:z", "pipeline:k=3", "ecse-llm",
                                  "topk-hybrid:-1", "ecse:scoring=magic", "ecse:rationales=llm", "ecse:k_init=3",
                                  "pipeline:scoring=magic", "pipeline:rationales=all"])
def test_bad_method_specs(spec):
    with pytest.raises(ConfigError):
        build_method(spec, HashingEncoder())


@needs_dev
def test_all_model_free_methods_run_on_the_dev_file_and_are_deterministic():
    questions = load_hotpot(str(DEV), limit=10)
    specs = ["topk-cosine:3", "bm25:3", "topk-hybrid:2", "ecse", "ecse:scoring=hybrid,rationales=auto", "ecse-window:1",
             "meve", "pipeline:t_max=150", "pipeline:scoring=dense"]
    enc = HashingEncoder()
    first = evaluate(questions, {s: build_method(s, enc) for s in specs})
    second = evaluate(questions, {s: build_method(s, enc) for s in specs})
    for a, b in zip(first, second):
        assert [r["selected"] for r in a.per_question] == [r["selected"] for r in b.per_question]
        assert 0 <= a.f1 <= 1 and 0 <= a.all_gold <= 1
    assert next(r for r in first if r.method == "topk-cosine:3").items == 3
    assert next(r for r in first if r.method == "topk-hybrid:2").items == 2


def test_topk_hybrid_is_the_fused_query_score():
    q = EvalQuestion("q", "zanzibar treaty", "", ["alpha", "the zanzibar treaty of 1890", "beta gamma", "treaty"],
                     frozenset({1}))
    assert build_method("topk-hybrid:1", HashingEncoder())(q) == [1]
    assert build_method("bm25:1", HashingEncoder())(q) == [1]


@needs_dev
def test_cli_eval_writes_report_and_plot(tmp_path):
    out, png = tmp_path / "report.json", tmp_path / "report.png"
    result = CliRunner().invoke(main, ["eval", "--data", str(DEV), "--limit", "5", "--method", "ecse",
                                       "--method", "bm25:2", "-o", str(out), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "ecse" in result.output and "yes/no" in result.output
    report = json.loads(out.read_text())
    assert report["meta"]["questions"] == 5 and [m["method"] for m in report["methods"]] == ["ecse", "bm25:2"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_eval_bad_data_is_a_one_line_error(tmp_path):
    bad = copy.deepcopy(ITEM)
    bad["supporting_facts"]["sent_id"] = [9]
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["eval", "--data", write(tmp_path, [bad]), "-o", str(out)])
    assert result.exit_code == 1 and "question 0" in result.output and "Traceback" not in result.output
    assert not out.exists()
    result = CliRunner().invoke(main, ["eval", "--data", write(tmp_path, [ITEM]), "--method", "ecse-llm"])
    assert result.exit_code == 1 and "--bundle" in result.output


@pytest.mark.parametrize(
    "selected, gold, expected",
    [
        ([1, 2, 3, 4], [2, 9], (0.25, 0.5, 1 / 3, True)),
        ([2, 2, 9], [2, 9], (1.0, 1.0, 1.0, True)),
        ([], [1], (0.0, 0.0, 0.0, False)),
        ([1], [], (0.0, 0.0, 0.0, False)),
        (["a", "b"], ["c"], (0.0, 0.0, 0.0, False)),
    ],
)
def test_precision_recall_f1_of_a_selection(selected, gold, expected):
    from meteora_edge import precision_recall_f1

    m = precision_recall_f1(selected, gold)
    assert (m.precision, m.recall, m.correct_chunk_found) == (expected[0], expected[1], expected[3])
    assert m.f1 == pytest.approx(expected[2]) and m.to_dict()["f1"] == m.f1


def test_eval_checks_plot_and_output_before_any_work(monkeypatch, tmp_path):
    import importlib.util

    from meteora_edge.cli import eval_command as command

    def no_work(*args, **kwargs):
        raise AssertionError("the evaluation started before the options were checked")

    monkeypatch.setattr(command, "load_questions", no_work)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    data = tmp_path / "data.json"
    data.write_text("[]")
    result = CliRunner().invoke(main, ["eval", "--data", str(data), "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == 1 and "'matplotlib' is not installed" in result.output
    assert 'pip install "meteora-edge[plot]"' in result.output
    result = CliRunner().invoke(main, ["eval", "--data", str(data), "-o", str(tmp_path / "no" / "r.json")])
    assert result.exit_code == 1 and "does not exist" in result.output


def test_gold_count_and_group_breakdown_average_each_groups_own_questions():
    from meteora_edge.evaluation import breakdown, breakdown_table

    questions = [
        EvalQuestion("a", "q", "", ["x", "y", "z"], frozenset({0}), "bridge"),
        EvalQuestion("b", "q", "", ["x", "y", "z"], frozenset({0, 1}), "bridge"),
        EvalQuestion("c", "q", "", ["x", "y", "z"], frozenset({1, 2}), "comparison"),
        EvalQuestion("d", "q", "", ["x", "y", "z"], frozenset(range(3)), None),
    ]
    (report,) = evaluate(questions, {"first": lambda _: [0]})
    by_count = breakdown(questions, [report], "gold-count")
    assert [(g["group"], g["questions"]) for g in by_count["groups"]] == [("1", 1), ("2", 2), ("3", 1)]
    two = by_count["groups"][1]["methods"]["first"]  # b: P 1, R 0.5, F1 2/3; c: all 0
    assert two["recall"] == 0.25 and two["f1"] == round(1 / 3, 4) and two["items"] == 1
    by_group = breakdown(questions, [report], "group")
    assert [(g["group"], g["questions"]) for g in by_group["groups"]] == [("-", 1), ("bridge", 2), ("comparison", 1)]
    assert by_group["groups"][1]["methods"]["first"]["f1"] == round((1 + 2 / 3) / 2, 4)
    table = breakdown_table(by_count)
    assert "F1 by gold-count" in table and "2 (n=2)" in table and "0.333" in table
    reports = evaluate(questions, {"first": lambda _: [0], "oracle": lambda q: sorted(q.gold)})
    kept = breakdown_table(breakdown(questions, reports, "gold-count")).split("items kept by gold-count", 1)[1]
    rows = {line.split()[0]: line.split()[1:] for line in kept.splitlines()[2:]}  # beside each gold count, how many kept
    assert rows == {"first": ["1.00", "1.00", "1.00"], "oracle": ["1.00", "2.00", "3.00"]}
    assert "items kept" not in breakdown_table(breakdown(questions, reports, "group"))


def test_gold_counts_from_six_share_a_row():
    from meteora_edge.evaluation import group_key

    many = [EvalQuestion(str(n), "q", "", ["c"] * 9, frozenset(range(n))) for n in (5, 6, 9)]
    assert [group_key(q, "gold-count") for q in many] == ["5", "6+", "6+"]
    with pytest.raises(ConfigError, match="gold-count"):
        group_key(many[0], "size")


@pytest.mark.parametrize("fixture, groups", [("dev_data", {"bridge", "comparison"}),
                                             ("contract_dev_data", {"entailment", "contradiction"})])
def test_cli_eval_by_gold_count_and_group_on_both_dev_sets(request, tmp_path, fixture, groups):
    data = request.getfixturevalue(fixture)
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["eval", "--data", str(data), "--limit", "12", "--method", "bm25:2",
                                       "--by", "gold-count", "--by", "group", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "F1 by gold-count" in result.output and "F1 by group" in result.output
    by_count, by_group = json.loads(out.read_text())["breakdowns"]
    assert sum(g["questions"] for g in by_count["groups"]) == 12
    assert {g["group"] for g in by_group["groups"]} <= groups
    counts = [int(g["group"].rstrip("+")) for g in by_count["groups"]]
    assert counts == sorted(counts)


def test_the_evaluation_cache_keeps_the_encoders_threshold_and_analyser():
    """Wrapped for the comparison, the hashing encoder keeps its own cosine τ (0.1, not ONNX's 0.4):
    a wrapper that dropped it made the cosine rung reject every candidate of most questions."""
    from meteora_edge.evaluation.methods import CachedEncoder
    from meteora_edge.models.analyzer import Analyzer, analyzer_of
    from meteora_edge.models.encoders import DEFAULT_COSINE_TAU, cosine_tau

    wrapped = CachedEncoder(HashingEncoder())
    assert cosine_tau(wrapped) == HashingEncoder.cosine_tau != DEFAULT_COSINE_TAU
    assert isinstance(analyzer_of(wrapped), Analyzer)
    question = EvalQuestion("q", "Who may terminate the agreement?", "",
                            ["Either party may terminate the agreement.", "Fees are due monthly.",
                             "The agreement is governed by English law."] + [f"Clause {i} is about rent." for i in range(8)],
                            frozenset({0}))
    assert build_method("pipeline", wrapped)(question) == [0]
