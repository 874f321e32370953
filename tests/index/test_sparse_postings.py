"""A local index with learned-sparse postings beside BM25: built, searched, updated, compacted and reopened,
the lexical scorer recorded and followed, a mismatched model refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import ConfigError, InputError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.pipeline.config import PipelineConfig
from meteora_edge.pipeline.engine import EvidencePipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sparse_fakes import FakeSparse, encoder_with_sparse  # noqa: E402

DOCS = [SourceDocument("a.md", "Either party may cancel this agreement."),
        SourceDocument("b.md", "Fees are due monthly."),
        SourceDocument("c.md", "The supplier ships goods weekly.")]


def _dots(query: str, index: LocalIndex, model: FakeSparse) -> np.ndarray:
    q = model.encode_sparse([query])[0]
    texts = [r["text"] for r in index.stored_records(range(index.id_count))]
    return np.array([q.dot(v) for v in model.encode_sparse(texts)])


def test_sparse_postings_round_trip_through_updates_and_compaction(tmp_path: Path) -> None:
    encoder = encoder_with_sparse()
    built = LocalIndex.build(tmp_path / "ix", DOCS, encoder, chunk_size=20, overlap=0, lexical_scorer="sparse")
    index = LocalIndex.load(tmp_path / "ix", encoder=encoder)
    assert index.lexical_scorer == "sparse" and index.manifest["lexical"] == {"scorer": "sparse", "model": "sparse:fake"}
    assert index.info()["lexical_scorer"] == "sparse"
    ids, scores = index.sparse_search("how to terminate", 5)
    assert ids.tolist() == [0] and scores[0] == pytest.approx(_dots("how to terminate", index, encoder.sparse_encoder)[0])
    assert index.bm25_search("how to terminate", 5)[0].tolist() == []  # BM25 stays beside, and cannot see it

    grown = index.add([SourceDocument("d.md", "The buyer may end the lease early.")], encoder)
    assert grown.lexical_scorer == "sparse" and grown.id_count == 4
    ids, _ = grown.sparse_search("terminate", 5)
    assert sorted(ids.tolist()) == [0, 3]
    shrunk = grown.remove(["a.md"])
    assert shrunk.sparse_search("terminate", 5)[0].tolist() == [3]  # a removed chunk is never returned
    compacted = shrunk.compact()
    reopened = LocalIndex.load(tmp_path / "ix", encoder=encoder)
    assert compacted.id_count == reopened.id_count == 3
    ids, scores = reopened.sparse_search("terminate", 5)
    assert [reopened.records([i])[0]["text"] for i in ids] == ["The buyer may end the lease early."]
    assert np.allclose(reopened.sparse_scores("terminate", range(3)),
                       _dots("terminate", reopened, encoder.sparse_encoder))
    assert built.lexical_scorer == "sparse"


def test_a_query_is_scored_as_its_index_was(tmp_path: Path) -> None:
    encoder = encoder_with_sparse()
    LocalIndex.build(tmp_path / "sparse", DOCS, encoder, chunk_size=20, overlap=0, lexical_scorer="sparse")
    LocalIndex.build(tmp_path / "bm25", DOCS, encoder, chunk_size=20, overlap=0)
    sparse = LocalIndex.load(tmp_path / "sparse", encoder=encoder)
    run = EvidencePipeline(PipelineConfig(verification="none"), encoder=encoder, index=sparse).run("how to terminate")
    assert run.trace.config["lexical"] == "sparse:fake" and run.ids[0] == 0
    bm25 = LocalIndex.load(tmp_path / "bm25", encoder=encoder)
    assert bm25.lexical_scorer == "bm25" and "lexical" not in bm25.manifest
    assert EvidencePipeline(PipelineConfig(), encoder=encoder, index=bm25).lexical_scorer == "bm25"
    with pytest.raises(ConfigError, match="built without sparse postings"):
        EvidencePipeline(PipelineConfig(lexical_scorer="sparse"), encoder=encoder, index=bm25)
    unopened = LocalIndex.load(tmp_path / "sparse")  # opened before the models were (select's order)
    assert EvidencePipeline(PipelineConfig(verification="none"), encoder=encoder, index=unopened).run(
        "how to terminate").ids[0] == 0
    with pytest.raises(LocalIndexError, match="not 'sparse:other'"):
        EvidencePipeline(PipelineConfig(verification="none"), encoder=encoder_with_sparse("sparse:other"),
                         index=unopened).run("how to terminate")
    plain = LocalIndex.load(tmp_path / "sparse", encoder=HashingEncoder())  # the same dense encoder, no sparse model
    with pytest.raises(ConfigError, match="was built with the learned sparse model"):
        EvidencePipeline(PipelineConfig(), encoder=HashingEncoder(), index=plain)
    with pytest.raises(InputError, match="open it with the bundle that holds it"):
        plain.sparse_search("terminate", 3)


def test_another_sparse_model_is_refused_in_one_line(tmp_path: Path) -> None:
    LocalIndex.build(tmp_path / "ix", DOCS, encoder_with_sparse(), chunk_size=20, overlap=0, lexical_scorer="sparse")
    other = encoder_with_sparse("sparse:other")
    with pytest.raises(LocalIndexError, match="'sparse:fake', not 'sparse:other'") as info:
        LocalIndex.load(tmp_path / "ix", encoder=other)
    assert "\n" not in str(info.value)
    index = LocalIndex.load(tmp_path / "ix")
    with pytest.raises(LocalIndexError, match="add to it with the bundle that holds that model"):
        index.add([SourceDocument("d.md", "New text.")], HashingEncoder())
    assert LocalIndex.load(tmp_path / "ix").id_count == 3  # nothing written


def test_build_without_the_model_and_damaged_postings_end_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a learned sparse model"):
        LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), lexical_scorer="sparse")
    assert not (tmp_path / "ix").exists() or not any((tmp_path / "ix").iterdir())
    LocalIndex.build(tmp_path / "ok", DOCS, encoder_with_sparse(), chunk_size=20, overlap=0, lexical_scorer="sparse")
    manifest_path = next((tmp_path / "ok").glob("gen-*/manifest.json"))
    manifest = json.loads(manifest_path.read_text())
    manifest["lexical"] = {"scorer": "splade", "model": "x"}
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(LocalIndexError) as info:
        LocalIndex.load(tmp_path / "ok")
    assert "lexical" in str(info.value) and "\n" not in str(info.value)
