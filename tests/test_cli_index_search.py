"""``index search`` (retrieval only) and the bundle an index remembers from its build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import make_bundle, table  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.index.local_index import LocalIndex  # noqa: E402
from meteora_edge.models.bundle import sha256_file  # noqa: E402
from meteora_edge.pipeline.engine import EvidencePipeline  # noqa: E402
from meteora_edge.pipeline.config import PipelineConfig  # noqa: E402
from meteora_edge.pipeline.retrieval import search  # noqa: E402
from meteora_edge.models.encoders import HashingEncoder  # noqa: E402


DOCS = ["either party may terminate the agreement after written notice",
        "fees are due monthly",
        "the supplier shall deliver the goods",
        "data ends after the agreement days"]


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    path = tmp_path / "docs.json"
    path.write_text(json.dumps(DOCS))
    return path


@pytest.fixture
def built(tmp_path: Path, docs: Path) -> dict:
    bundle = make_bundle(tmp_path / "bundle")
    out = tmp_path / "ix"
    result = run("index", "build", str(docs), "--out", str(out), "--bundle", str(bundle), "--chunk-size", "20")
    assert result.exit_code == 0, result.output
    return {"bundle": bundle, "index": out}


def test_build_records_the_bundle_path_and_manifest_hash(built):
    record = LocalIndex.load(built["index"]).manifest["encoder"]["bundle"]
    assert record == {"path": str(built["bundle"].resolve()),
                      "manifest_sha256": sha256_file(built["bundle"] / "manifest.json")}
    info = json.loads(run("index", "info", str(built["index"])).output)
    assert info["encoder"]["bundle"]["path"] == str(built["bundle"].resolve())


def test_search_uses_the_remembered_bundle_and_ranks_like_select(built):
    result = run("index", "search", str(built["index"]), "-q", "may either party terminate", "-k", "2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["encoder"].startswith("onnx:tiny-test-encoder")
    hits = data["hits"]
    assert len(hits) == 2 and hits[0]["text"] == DOCS[0]
    assert hits[0]["score"] >= hits[1]["score"]
    assert {"dense_score", "lexical_score", "id", "text"} <= set(hits[0])
    # the same candidates, scores and order as the pipeline's first phase (default k_init, the search pool)
    index = LocalIndex.load(built["index"])
    from meteora_edge.models.onnx_encoder import OnnxEncoder

    encoder = OnnxEncoder.from_bundle(built["bundle"], cache=False)
    pipeline = EvidencePipeline(PipelineConfig(), encoder=encoder, index=index)
    trace = pipeline.run("may either party terminate").trace
    retrieval = [c for c in trace.candidates]
    assert [c.text for c in retrieval][:2] == [h["text"] for h in hits]
    assert np.allclose([c.retrieval_score for c in retrieval][:2], [h["score"] for h in hits])


def test_search_text_output_and_scorings(built):
    text = run("index", "search", str(built["index"]), "-q", "fees due monthly", "-k", "1")
    assert text.exit_code == 0, text.output
    assert "1. [1] score" in text.output and "fees are due monthly" in text.output
    dense = json.loads(run("index", "search", str(built["index"]), "-q", "fees due monthly", "--scoring", "dense",
                           "--json").stdout)
    assert all(h["lexical_score"] is None for h in dense["hits"])
    assert [h["score"] for h in dense["hits"]] == [h["dense_score"] for h in dense["hits"]]
    assert len(dense["hits"]) == len(DOCS)


def test_remembered_bundle_is_used_by_select_and_add(built, tmp_path):
    selected = run("select", "--index", str(built["index"]), "--query", "who may terminate", "--format", "json")
    assert selected.exit_code == 0, selected.output
    assert "hashing encoder" not in selected.output
    more = tmp_path / "more.json"
    more.write_text(json.dumps(["the goods are delivered monthly"]))
    added = run("index", "add", str(built["index"]), str(more))
    assert added.exit_code == 0, added.output
    assert LocalIndex.load(built["index"]).manifest["encoder"]["bundle"]["path"] == str(built["bundle"].resolve())


def test_a_gone_or_changed_bundle_is_one_line(built):
    manifest = built["bundle"] / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"licence": "Apache-2.0"', '"licence": "MIT"'))
    one_line_error(run("index", "search", str(built["index"]), "-q", "fees"), "whose manifest changed since",
                   str(built["bundle"].resolve()), "give --bundle")
    shutil.rmtree(built["bundle"])
    for args in (("index", "search", str(built["index"]), "-q", "fees"),
                 ("select", "--index", str(built["index"]), "--query", "fees")):
        one_line_error(run(*args), "which is gone", "give --bundle")


def test_an_explicit_bundle_overrides_and_is_checked_against_the_encoder(built, tmp_path):
    copy = shutil.copytree(built["bundle"], tmp_path / "copy")
    result = run("index", "search", str(built["index"]), "-q", "fees", "--bundle", str(copy), "--json")
    assert result.exit_code == 0, result.output  # same files, same identity
    other = make_bundle(tmp_path / "other", embeddings=table(seed=5))
    one_line_error(run("index", "search", str(built["index"]), "-q", "fees", "--bundle", str(other)),
                   "was built with encoder")


def test_an_index_built_without_a_bundle_records_none(tmp_path, docs):
    out = tmp_path / "ix"
    assert run("index", "build", str(docs), "--out", str(out)).exit_code == 0
    assert "bundle" not in LocalIndex.load(out).manifest["encoder"]
    result = run("index", "search", str(out), "-q", "fees monthly", "-k", "1", "--json")
    assert json.loads(result.stdout)["hits"][0]["text"] == "fees are due monthly"


@pytest.mark.parametrize("args, fragment", [
    (["-q", "  "], "--query must not be empty"),
    (["-q", "x", "-k", "0"], "Invalid value for '-k'"),
])
def test_search_bad_inputs(built, args, fragment):
    result = run("index", "search", str(built["index"]), *args)
    assert result.exit_code != 0 and fragment in result.output and "Traceback" not in result.output


def test_search_of_a_missing_index_is_one_line(tmp_path):
    one_line_error(run("index", "search", str(tmp_path / "nope"), "-q", "x"), "nope")


def test_library_search_validates_its_arguments():
    from meteora_edge.errors import ConfigError
    from meteora_edge.index.memory_index import InMemoryIndex

    enc = HashingEncoder()
    index = InMemoryIndex(DOCS, enc)
    assert [h.text for h in search(index, enc, "supplier deliver goods", k=1)] == [DOCS[2]]
    for kwargs, message in (({"k": 0}, "k must be a positive integer"), ({"scoring": "bm9"}, "scoring must be one of")):
        with pytest.raises(ConfigError, match=message):
            search(index, enc, "goods", **kwargs)
    with pytest.raises(ConfigError, match="query must be a non-empty string"):
        search(index, enc, " ")


def _hits(index: Path, query: str, k: int) -> list[dict]:
    result = run("index", "search", str(index), "-q", query, "-k", str(k), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["hits"]


def test_search_is_sorted_by_its_score_and_a_score_does_not_depend_on_k(tmp_path):
    # 90 one-line documents (hashing encoder): more than the search pool, so k = 80 reaches past it
    words = ["notice", "terminate", "fees", "monthly", "supplier", "goods", "data", "agreement", "party", "days"]
    documents = [" ".join(words[(i * j + i) % len(words)] for j in range(6)) + f" clause {i}" for i in range(90)]
    (tmp_path / "docs.json").write_text(json.dumps(documents))
    built = run("index", "build", str(tmp_path / "docs.json"), "--out", str(tmp_path / "ix"), "--chunk-size", "20")
    assert built.exit_code == 0, built.output
    seen: dict[int, float] = {}
    for k in (1, 2, 3, 10, 50, 80):
        hits = _hits(tmp_path / "ix", "how much notice ends the agreement", k)
        scores = [h["score"] for h in hits]
        assert len(hits) == k and scores == sorted(scores, reverse=True), (k, scores)
        if k <= 3:
            assert all(round(s, 3) != 0 for s in scores), (k, scores)
        for hit in hits:
            assert seen.setdefault(hit["id"], hit["score"]) == pytest.approx(hit["score"]), (k, hit["id"])
    assert _hits(tmp_path / "ix", "how much notice ends the agreement", 1)[0]["id"] == max(seen, key=seen.get)
