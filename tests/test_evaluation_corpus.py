"""Corpus-level evaluation over a BEIR folder: graded qrels, chunks scored as their documents, retrieval metrics, errors."""

import importlib.util
import json

import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.errors import ConfigError, InputError
from meteora_edge.evaluation import (
    breakdown,
    build_corpus_method,
    evaluate_corpus,
    load_beir,
    ndcg_at_k,
    recall_at_k,
    temporary_index,
)

from repo_paths import EXAMPLES

CORPUS = [
    {"_id": "d1", "title": "Tower", "text": "The Eiffel tower stands in Paris."},
    {"_id": "d2", "title": "River", "text": "The Seine river flows through Paris."},
    {"_id": "d3", "title": "Bridge", "text": "The Golden Gate bridge is in San Francisco."},
    {"_id": "d4", "title": "", "text": "Fees are due monthly under the agreement."},
    {"_id": "d5", "text": "warranty claims go to the vendor. warranty claims need a receipt. warranty claims close after a year."},
]
QUERIES = [
    {"_id": "q1", "text": "Which city has the Eiffel tower?", "metadata": {"group": "places"}},
    {"_id": "q2", "text": "When are fees due?"},
    {"_id": "q3", "text": "Nothing relevant here"},
    {"_id": "q4", "text": "Not judged in this split"},
    {"_id": "q5", "text": "How do warranty claims work?", "group": "terms"},
]
QRELS = ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q1\td2\t1", "q1\td3\t0", "q2\td4\t1", "q3\td3\t0", "q5\td5\t1"]


def make_beir(folder, corpus=CORPUS, queries=QUERIES, qrels=QRELS, split="test"):
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        (folder / name).write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(qrels) + "\n")
    return str(folder)


def test_graded_qrels_count_above_zero_as_gold_and_skip_queries_without_gold(tmp_path):
    data = load_beir(make_beir(tmp_path / "b"))
    assert [q.qid for q in data.queries] == ["q1", "q2", "q5"] and data.skipped_queries == 1
    q1 = data.queries[0]
    assert q1.gold == {"d1", "d2"} and q1.relevance == {"d1": 2, "d2": 1, "d3": 0} and q1.group == "places"
    assert data.queries[2].group == "terms"
    assert [d.text for d in data.documents[:1]] == ["Tower: The Eiffel tower stands in Paris."]
    assert data.documents[3].text == "Fees are due monthly under the agreement."
    assert [q.qid for q in load_beir(make_beir(tmp_path / "b"), limit=2).queries] == ["q1", "q2"]


@pytest.mark.parametrize("ranking, relevance, k, expected", [
    (["b", "a"], {"a": 2, "b": 1}, 10, (1 + 2 / 1.5849625007211563) / (2 + 1 / 1.5849625007211563)),
    (["a", "b"], {"a": 2, "b": 1}, 10, 1.0),
    (["x", "a"], {"a": 1}, 1, 0.0),
    (["a", "a", "b"], {"a": 1, "b": 1}, 2, 1 / (1 + 1 / 1.5849625007211563)),
    (["a"], {"a": 0, "b": -1}, 10, 0.0),
])
def test_ndcg_uses_linear_graded_gain_and_counts_a_repeat_once(ranking, relevance, k, expected):
    assert ndcg_at_k(ranking, relevance, k) == pytest.approx(expected)


def test_recall_at_k():
    assert recall_at_k(["a", "b", "c"], {"c", "z"}, 2) == 0.0 and recall_at_k(["a", "b", "c"], {"c", "z"}, 3) == 0.5
    assert recall_at_k(["a"], set(), 1) == 0.0
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        recall_at_k(["a"], {"a"}, 0)


def test_chunks_count_as_their_documents_and_retrieval_is_scored_on_the_candidate_stage(tmp_path):
    data = load_beir(make_beir(tmp_path / "b"))
    encoder = HashingEncoder()
    with temporary_index(data, encoder, chunk_size=5) as index:
        assert len(index) > len(data.documents)  # d5 is cut into several chunks
        methods = {s: build_corpus_method(s, index, encoder) for s in ("bm25:1", "bm25:3", "pipeline")}
        reports = evaluate_corpus(data.queries, methods, index)
    one, three, pipe = ({r["id"]: r for r in rep.per_question} for rep in reports)
    assert one["q2"]["selected"] == ["d4"] and one["q2"]["f1"] == 1.0
    assert one["q1"]["selected"] == ["d1"] and one["q1"]["precision"] == 1.0 and one["q1"]["recall"] == 0.5
    assert three["q5"]["selected"] == ["d5"] and three["q5"]["items"] == 3 and three["q5"]["precision"] == 1.0
    for rows in (one, three, pipe):
        for qid, row in rows.items():
            relevance = next(q.relevance for q in data.queries if q.qid == qid)
            assert row["ndcg@10"] == pytest.approx(ndcg_at_k(row["ranked"], relevance, 10))
            assert row["recall@pool"] == 1.0  # the corpus is smaller than k_init: every document is a candidate
            assert row["recall"] <= row["recall@candidates"]
    assert reports[0].retrieval["recall@pool"] == 1.0 and set(reports[0].retrieval) == {
        "recall@10", "recall@pool", "recall@candidates", "ndcg@10"}
    table = breakdown(data.queries, reports, "group")
    assert [(g["group"], g["questions"]) for g in table["groups"]] == [("-", 1), ("places", 1), ("terms", 1)]


def test_methods_that_do_not_run_over_an_index_are_refused(tmp_path):
    data = load_beir(make_beir(tmp_path / "b"))
    with temporary_index(data, HashingEncoder()) as index:
        with pytest.raises(ConfigError, match="does not run over an index"):
            build_corpus_method("ecse", index, HashingEncoder())
        with pytest.raises(ConfigError, match="positive K"):
            build_corpus_method("bm25:0", index, HashingEncoder())


def _lines(rows):
    return [r if isinstance(r, str) else json.dumps(r) for r in rows]


@pytest.mark.parametrize("change, where, message", [
    ({"qrels": QRELS + ["q2\td9\t1"]}, "qrels/test.tsv line 8", "corpus-id 'd9' is not in corpus.jsonl"),
    ({"qrels": QRELS + ["q9\td1\t1"]}, "qrels/test.tsv line 8", "query-id 'q9' is not in queries.jsonl"),
    ({"qrels": QRELS + ["q2\td4\t2"]}, "qrels/test.tsv line 8", "duplicate judgement of ('q2', 'd4')"),
    ({"qrels": QRELS + ["q2\td4\thigh"]}, "qrels/test.tsv line 8", "score 'high' is not an integer"),
    ({"qrels": QRELS + ["q2 d4 1"]}, "qrels/test.tsv line 8", "separated by tabs, got 1 field(s)"),
    ({"qrels": [QRELS[0], "q1\td1\t0"]}, "qrels/test.tsv", "no query has a document scored above 0"),
    ({"corpus": CORPUS + [{"_id": "d1", "text": "again"}]}, "corpus.jsonl line 6", "duplicate _id 'd1' (first at line 1)"),
    ({"corpus": CORPUS + [{"_id": "d9", "text": " "}]}, "corpus.jsonl line 6", "needs a 'text' string"),
    ({"corpus": CORPUS + ['{"_id": "d9", ']}, "corpus.jsonl line 6", "is not valid JSON"),
    ({"corpus": CORPUS + [{"text": "no id"}]}, "corpus.jsonl line 6", "'_id' must be a non-empty string"),
    ({"queries": QUERIES + [{"_id": "q1", "text": "again"}]}, "queries.jsonl line 6", "duplicate _id 'q1' (first at line 1)"),
    ({"queries": QUERIES + [{"_id": "q6", "text": ""}]}, "queries.jsonl line 6", "query 'q6' is empty"),
    ({"queries": QUERIES + [["q6"]]}, "queries.jsonl line 6", "must be a JSON object"),
])
def test_bad_beir_data_is_one_error_naming_file_and_line(tmp_path, change, where, message):
    folder = make_beir(tmp_path / "b", **change)
    with pytest.raises(InputError) as info:
        load_beir(folder)
    assert f"{folder}/{where}" in str(info.value) and message in str(info.value)


def test_a_missing_split_or_file_names_what_is_there(tmp_path):
    folder = make_beir(tmp_path / "b")
    make_beir(tmp_path / "b", split="dev")
    with pytest.raises(InputError, match=r"has no split 'train': .*qrels/train.tsv is missing; splits there: dev, test"):
        load_beir(folder, split="train")
    (tmp_path / "b" / "corpus.jsonl").unlink()
    with pytest.raises(InputError, match="is not a BEIR folder: corpus.jsonl is missing"):
        load_beir(folder)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "corpus.jsonl").write_text("")
    (tmp_path / "c" / "queries.jsonl").write_text("")
    with pytest.raises(InputError, match="the folder has no qrels"):
        load_beir(str(tmp_path / "c"))


def test_cli_builds_then_reuses_the_index_and_refuses_an_index_of_another_corpus(tmp_path):
    folder, index = make_beir(tmp_path / "b"), str(tmp_path / "ix")
    out = tmp_path / "r.json"
    args = ["eval", "--data", folder, "--index", index, "--method", "bm25:1", "--method", "pipeline", "--no-cache"]
    first = CliRunner().invoke(main, [*args, "--by", "gold-count", "-o", str(out)])
    assert first.exit_code == 0, first.output
    assert "index built" in first.output and "R@10" in first.output and "F1 by gold-count" in first.output
    report = json.loads(out.read_text())
    assert report["meta"]["queries"] == 3 and report["meta"]["skipped_queries"] == 1 and report["meta"]["index_built"]
    assert report["methods"][0]["retrieval"]["recall@pool"] == 1.0
    again = tmp_path / "again.json"
    second = CliRunner().invoke(main, [*args, "-o", str(again)])
    assert second.exit_code == 0 and "index reused" in second.output
    assert not json.loads(again.read_text())["meta"]["index_built"]
    strip = ("latency_ms_p50", "latency_ms_mean")
    assert [{k: v for k, v in m.items() if k not in strip} for m in json.loads(again.read_text())["methods"]] == [
        {k: v for k, v in m.items() if k not in strip} for m in report["methods"]]
    other = make_beir(tmp_path / "other", corpus=CORPUS[:4], qrels=QRELS[:5])
    result = CliRunner().invoke(main, ["eval", "--data", other, "--index", index, "--no-cache"])
    assert result.exit_code == 1 and "does not hold the corpus" in result.output and "Traceback" not in result.output
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    result = CliRunner().invoke(main, ["eval", "--data", folder, "--index", str(tmp_path / "notes")])
    assert result.exit_code == 1 and "refusing to touch it" in result.output
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"


@pytest.mark.parametrize("flags, message", [
    (["--split", "dev"], "has no split 'dev'"),
    (["--level", "paragraph"], "--level applies to the HotpotQA layout only"),
    (["--method", "ecse-llm"], "do not run at corpus level"),
    (["--method", "ecse"], "does not run over an index"),
])
def test_cli_corpus_errors_are_one_line_and_write_nothing(tmp_path, flags, message):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["eval", "--data", make_beir(tmp_path / "b"), *flags, "-o", str(out)])
    assert result.exit_code == 1 and message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.slow
def test_corpus_level_over_the_pooled_hotpot_dev_paragraphs(dev_data, tmp_path):
    spec = importlib.util.spec_from_file_location("convert_eval_data", EXAMPLES / "convert_eval_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder, out = tmp_path / "hotpot", tmp_path / "r.json"
    module.main([str(dev_data), str(folder), "--layout", "beir"])
    result = CliRunner().invoke(main, ["eval", "--data", str(folder), "--by", "gold-count", "--per-question",
                                       "--no-cache", "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert (report["meta"]["queries"], report["meta"]["documents"], report["meta"]["chunks"]) == (50, 2158, 2158)
    assert [m["method"] for m in report["methods"]] == ["topk-cosine:3", "bm25:3", "topk-hybrid:3", "pipeline"]
    for method in report["methods"]:
        r = method["retrieval"]
        assert r["recall@10"] <= r["recall@pool"] <= r["recall@candidates"]
        for row in method["per_question"]:
            assert row["recall"] <= row["recall@candidates"] + 1e-9
            assert row["items"] == 3 or method["method"] == "pipeline"
    hybrid, pipe = report["methods"][2], report["methods"][3]
    assert hybrid["retrieval"]["recall@pool"] == pipe["retrieval"]["recall@pool"]  # one candidate stage
    assert report["meta"]["wall_seconds"] < 120


def test_the_converter_asks_a_question_once_with_the_union_of_its_gold(tmp_path):
    spec = importlib.util.spec_from_file_location("convert_eval_data", EXAMPLES / "convert_eval_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def item(qid: str, title: str, gold: int) -> dict:
        sentences = ["The recipient shall return the information.", "", "Notices go to the address above."]
        return {"id": qid, "question": "  Must the recipient return the information?", "answer": "yes", "type": "x",
                "context": {"title": [title], "sentences": [sentences]},
                "supporting_facts": {"title": [title], "sent_id": [gold]}}

    data = tmp_path / "pairs.json"
    data.write_text(json.dumps([item("a", "nda-1", 0), item("b", "nda-2", 2)]))
    module.main([str(data), str(tmp_path / "beir"), "--layout", "beir"])
    corpus = [json.loads(line)["_id"] for line in (tmp_path / "beir" / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (tmp_path / "beir" / "queries.jsonl").read_text().splitlines()]
    qrels = (tmp_path / "beir" / "qrels" / "test.tsv").read_text().splitlines()[1:]
    assert corpus == ["nda-1#0", "nda-1#2", "nda-2#0", "nda-2#2"]  # the empty sentence is left out
    assert [(q["_id"], q["text"]) for q in queries] == [("a", "Must the recipient return the information?")]
    assert qrels == ["a\tnda-1#0\t1", "a\tnda-2#2\t1"]
