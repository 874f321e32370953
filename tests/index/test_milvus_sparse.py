"""Learned-sparse vectors in a Milvus collection (Milvus Lite): a SPARSE_FLOAT_VECTOR field searched with
metric IP, recorded in the collection's properties, kept through sync/add/remove, followed by queries, and a
mismatched or missing model refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.errors import CollectionError, ConfigError, InputError
from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.index.milvus_location import milvus_location
from meteora_edge.pipeline.config import PipelineConfig
from meteora_edge.pipeline.engine import EvidencePipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sparse_fakes import FakeSparse, encoder_with_sparse  # noqa: E402

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
from meteora_edge.index.milvus_index import MilvusIndex  # noqa: E402
from meteora_edge.index.milvus_sparse import FIELD, PROPERTY  # noqa: E402

DOCS = [SourceDocument("a.md", "Either party may cancel this agreement."),
        SourceDocument("b.md", "Fees are due monthly."),
        SourceDocument("c.md", "The supplier ships goods weekly.")]


class CountingSparse(FakeSparse):
    def __init__(self, identity: str = "sparse:fake") -> None:
        super().__init__(identity)
        self.texts: list[str] = []

    def encode_sparse(self, texts):
        self.texts += list(texts)
        return super().encode_sparse(texts)


def _encoder(model: FakeSparse | None = None) -> HashingEncoder:
    encoder = HashingEncoder()
    encoder.sparse_encoder = model or FakeSparse()  # type: ignore[attr-defined]
    return encoder


def _dots(index: MilvusIndex, query: str, model: FakeSparse) -> dict[int, float]:
    """The dot product of the query's vector with each stored chunk's, computed here from the texts."""
    q = model.encode_sparse([query])[0]
    rows = list(index.each_record(["text"]))
    return {int(r["id"]): q.dot(model.encode_sparse([r["text"]])[0]) for r in rows}


def _build(tmp_path: Path, encoder, documents=DOCS, **kw) -> MilvusIndex:
    return MilvusIndex.build(milvus_location(str(tmp_path / "c.db")), documents, encoder, chunk_size=20, overlap=0,
                             lexical_scorer="sparse", **kw)


def test_the_sparse_field_is_searched_by_dot_product_and_recorded(tmp_path: Path) -> None:
    encoder = _encoder()
    index = _build(tmp_path, encoder)
    description = index.client.describe_collection(index.location.collection)
    fields = {f["name"]: f for f in description["fields"]}
    assert str(fields[FIELD]["type"].name) == "SPARSE_FLOAT_VECTOR"
    assert index.properties[PROPERTY] == '{"scorer": "sparse", "model": "sparse:fake"}'
    assert index.lexical_scorer == "sparse" and index.info()["lexical_scorer"] == "sparse"
    assert index.info()["sparse_model"] == "sparse:fake"
    ids, scores = index.sparse_search("how to terminate", 5)  # "cancel" implies "terminate": only a.md holds it
    want = _dots(index, "how to terminate", encoder.sparse_encoder)
    assert ids.tolist() == [0] and scores[0] == pytest.approx(want[0], rel=1e-6)
    assert index.bm25_search("how to terminate", 5)[0].tolist() == []  # BM25 stays beside, and cannot see it
    dots = _dots(index, "fees monthly terminate", encoder.sparse_encoder)
    assert dots[2] == 0.0 and dots[0] > 0 and dots[1] > 0
    np.testing.assert_allclose(index.sparse_scores("fees monthly terminate", [2, 1, 0, 1]),
                               [dots[2], dots[1], dots[0], dots[1]], rtol=1e-6)
    reopened = MilvusIndex.open(index.location, encoder=encoder)
    assert reopened.lexical_scorer == "sparse" and reopened.sparse_encoder is encoder.sparse_encoder
    run = EvidencePipeline(PipelineConfig(verification="none"), encoder=encoder, index=reopened).run("how to terminate")
    assert run.trace.config["lexical"] == "sparse:fake" and run.ids[0] == 0
    reopened.close()
    index.close()


def test_sync_add_and_remove_keep_the_sparse_vectors(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "terms.md").write_text("Either party may cancel the agreement.")
    (folder / "fees.md").write_text("Fees are due monthly.")
    model = CountingSparse()
    encoder = _encoder(model)
    index = _build(tmp_path, encoder, read_documents([folder]))
    assert len(index) == 2
    model.texts.clear()
    (folder / "fees.md").rename(folder / "payment.md")  # the same text: its stored sparse vector comes along
    (folder / "lease.md").write_text("The buyer may end the lease early.")
    index.sync([folder], encoder)
    assert model.texts == ["The buyer may end the lease early."]
    stored = {r["text"]: r[FIELD] for r in index.each_record(["text", FIELD])}
    for text, vector in stored.items():
        want = model.encode_sparse([text])[0]
        assert sorted(vector) == want.ids.tolist() and np.allclose([vector[i] for i in sorted(vector)], want.weights)
    ids, _ = index.sparse_search("terminate", 5)
    assert sorted(index.records([int(i)])[0]["text"] for i in ids) == ["Either party may cancel the agreement.",
                                                                      "The buyer may end the lease early."]
    index.add([SourceDocument("x.md", "Nothing here ends.")], encoder)
    index.remove([str(folder / "terms.md")])
    ids, scores = index.sparse_search("terminate", 5)
    assert [index.records([int(i)])[0]["text"] for i in ids] == ["The buyer may end the lease early."]
    assert scores[0] == pytest.approx(_dots(index, "terminate", model)[int(ids[0])], rel=1e-6)
    reopened = MilvusIndex.open(index.location)
    assert reopened.lexical_scorer == "sparse" and len(reopened) == 3
    assert reopened.sparse_search("terminate", 5, model=model)[0].tolist() == ids.tolist()
    reopened.close()
    index.close()


def test_a_query_is_scored_as_its_collection_was_and_mismatches_end_in_one_line(tmp_path: Path) -> None:
    sparse = _build(tmp_path, _encoder())
    plain = MilvusIndex.build(milvus_location(str(tmp_path / "c.db"), "plain"), DOCS, HashingEncoder(), chunk_size=20,
                              overlap=0)
    assert plain.lexical_scorer == "bm25" and PROPERTY not in plain.properties and "sparse_model" not in plain.info()
    with pytest.raises(ConfigError, match="built without sparse postings"):
        EvidencePipeline(PipelineConfig(lexical_scorer="sparse"), encoder=_encoder(), index=plain)
    with pytest.raises(InputError, match="holds no learned-sparse vectors"):
        plain.sparse_search("terminate", 3, model=FakeSparse())
    with pytest.raises(ConfigError, match="was built with the learned sparse model"):
        EvidencePipeline(PipelineConfig(), encoder=HashingEncoder(), index=MilvusIndex.open(sparse.location))
    with pytest.raises(InputError, match="open it with the bundle that holds it"):
        MilvusIndex.open(sparse.location).sparse_search("terminate", 3)
    other = encoder_with_sparse("sparse:other")
    with pytest.raises(CollectionError, match="'sparse:fake', not 'sparse:other'") as info:
        MilvusIndex.open(sparse.location, encoder=other)
    assert "\n" not in str(info.value)
    with pytest.raises(CollectionError, match="not 'sparse:other'"):
        sparse.add([SourceDocument("d.md", "New text.")], other)
    with pytest.raises(ConfigError, match="needs a learned sparse model"):
        sparse.add([SourceDocument("d.md", "New text.")], HashingEncoder())
    assert len(MilvusIndex.open(sparse.location)) == 3  # nothing written
    with pytest.raises(ConfigError, match="needs a learned sparse model"):
        MilvusIndex.build(milvus_location(str(tmp_path / "c.db"), "none"), DOCS, HashingEncoder(), lexical_scorer="sparse")
    assert not sparse.client.has_collection("none")
    sparse.client.alter_collection_properties(sparse.location.collection, properties={PROPERTY: '{"scorer": "splade"}'})
    with pytest.raises(CollectionError, match="lexical scorer") as info:
        MilvusIndex.open(sparse.location)
    assert "\n" not in str(info.value)
    plain.close()
    sparse.close()


def test_index_build_with_the_sparse_scorer_on_milvus_from_the_cli(tmp_path: Path, monkeypatch) -> None:
    from meteora_edge.cli import index_commands
    from meteora_edge.cli.main import main

    monkeypatch.setattr(index_commands, "encoder_from_options", lambda *a, **k: _encoder())
    (tmp_path / "a.md").write_text("Either party may cancel this agreement.")
    result = CliRunner().invoke(main, ["index", "build", str(tmp_path / "a.md"), "--backend", "milvus", "--uri",
                                       str(tmp_path / "c.db"), "--lexical-scorer", "sparse"])
    assert result.exit_code == 0, result.output
    index = MilvusIndex.open(milvus_location(str(tmp_path / "c.db")))
    assert index.lexical_scorer == "sparse" and index.sparse_search("terminate", 3, model=FakeSparse())[0].tolist() == [0]
    index.close()
