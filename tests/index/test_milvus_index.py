"""The Milvus backend on Milvus Lite (the real engine, embedded): the CorpusIndex calls, the
pipeline over it, encoder and schema checks, atomic builds, add, and the URL forms."""

import sys

import numpy as np
import pytest

from meteora_edge import EvidencePipeline, HashingEncoder, LocalIndex, PipelineConfig
from meteora_edge.errors import CollectionError, InputError, MissingExtraError
from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.index.corpus_index import CorpusIndex
from meteora_edge.index.milvus_location import MilvusLocation, connect, milvus_location, parse_milvus_url

from repo_paths import EXAMPLES

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
from meteora_edge.index.milvus_index import MilvusIndex  # noqa: E402

ENC = HashingEncoder()
QUERY = "How much notice is needed to end the agreement?"


class OtherEncoder(HashingEncoder):
    identity = "other:384"


def _docs():
    return read_documents([str(EXAMPLES / "corpus")], strict=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("milvus")
    location = milvus_location(str(folder / "corpus.db"))
    index = MilvusIndex.build(location, _docs(), ENC, chunk_size=40, overlap=4)
    local = LocalIndex.build(folder / "local", _docs(), ENC, chunk_size=40, overlap=4)
    yield index, local
    index.close()


def test_it_holds_what_a_local_index_holds(built):
    index, local = built
    assert isinstance(index, CorpusIndex) and index.encoder_id == "hashing:384"
    assert len(index) == len(local) and index.location.collection == "corpus"
    ids = [5, 0, len(local) - 1]
    mine, theirs = index.records(ids), local.records(ids)
    for a, b in zip(mine, theirs):
        assert {k: a[k] for k in ("id", "text", "sha256", "source", "position", "start", "end", "metadata", "file")} == {
            k: b[k] for k in ("id", "text", "sha256", "source", "position", "start", "end", "metadata", "file")}
    np.testing.assert_allclose(index.vectors_for(ids), local.vectors_for(ids), atol=1e-6)
    assert index.vectors_for([]).shape == (0, 384)
    info = index.info()
    assert info["backend"] == "milvus" and info["chunks"] == len(local) and info["full_text_search"] is True
    assert info["sources"] == 3 and info["chunking"] == {"chunk_size": 40, "overlap": 4, "boundaries": "text"}


def test_a_new_milvus_lite_database_is_owner_only(built):
    index, local = built
    assert (local.root.parent / "corpus.db").stat().st_mode & 0o777 == 0o700 == local.root.stat().st_mode & 0o777


def test_knn_matches_exact_search(built):
    index, local = built
    for text in (QUERY, "personal data retention", "employee annual leave"):
        q = ENC.encode([text])[0]
        ids, scores = index.search(q, 5)
        exact_ids, exact_scores = local.search(q, 5)
        np.testing.assert_allclose(scores, exact_scores, atol=1e-5)
        assert set(ids) == set(exact_ids) or np.isclose(scores[-1], scores[-2], atol=1e-6)


def test_full_text_search_is_milvus_bm25(built):
    index, local = built
    ids, scores = index.bm25_search(QUERY, 5)
    assert len(ids) == 5 and np.all(scores > 0) and list(scores) == sorted(scores, reverse=True)
    # Milvus's BM25 is not ours (another IDF, other statistics): the best chunks overlap, the numbers differ
    local_ids, local_scores = local.bm25_search(QUERY, 5)
    assert len(set(ids) & set(local_ids)) >= 3 and not np.allclose(scores, local_scores)
    lexical = index.lexical_scores(QUERY, [int(ids[1]), int(ids[0]), 10**6 - 1])
    np.testing.assert_allclose(lexical[:2], [scores[1], scores[0]], rtol=1e-5)
    assert lexical[2] == 0.0  # an id outside the collection scores nothing
    assert index.bm25_search("%%% ---", 5)[0].size == 0 and index.lexical_scores("", [1, 2]).tolist() == [0, 0]
    assert index.bm25_search("zzzunknownword", 5)[0].size == 0


def test_the_pipeline_runs_over_milvus_with_the_fallback_through_milvus_bm25(built):
    index, _ = built
    config = PipelineConfig(k_init=6, n_min=4, tau_relevance=0.05, t_max=400)
    result = EvidencePipeline(config, encoder=ENC, index=index).run(QUERY)
    phases = {p.name: p for p in result.trace.phases}
    assert phases["candidates"].details["source"] == "knn+bm25" and result.passages
    fallback = phases["fallback"]
    assert fallback.details["fired"] and fallback.details["scope"] == "index" and fallback.details["added"]
    bm25_ids, bm25_scores = index.bm25_search(QUERY, 50)
    milvus_bm25 = dict(zip(bm25_ids.tolist(), bm25_scores.tolist()))
    via_fallback = [c for c in result.trace.candidates if c.via_fallback]
    assert via_fallback and all(c.bm25_score == pytest.approx(milvus_bm25[c.chunk_id]) for c in via_fallback)
    assert all(r["text"] for r in result.documents)


def test_another_encoder_is_refused(built):
    index, _ = built
    with pytest.raises(CollectionError, match="built with encoder 'hashing:384', not 'other:384'"):
        MilvusIndex.open(index.location, encoder=OtherEncoder())
    with pytest.raises(Exception, match="encoder"):
        EvidencePipeline(PipelineConfig(), encoder=OtherEncoder(), index=index)


def test_a_collection_not_ours_or_missing_is_refused(built):
    index, _ = built
    client = index.client
    if not client.has_collection("plain"):
        client.create_collection("plain", dimension=4)
    with pytest.raises(CollectionError, match="not written by meteora-edge"):
        MilvusIndex.open(MilvusLocation(index.location.uri, "plain"))
    with pytest.raises(CollectionError, match="no collection 'absent'.*index build --backend milvus"):
        MilvusIndex.open(MilvusLocation(index.location.uri, "absent"))


def test_build_refuses_an_existing_collection_and_overwrite_replaces_it_whole(tmp_path):
    location = milvus_location(str(tmp_path / "x.db"), "docs")
    first = MilvusIndex.build(location, _docs()[:1], ENC, chunk_size=40)
    count = len(first)
    with pytest.raises(InputError, match="already exists"):
        MilvusIndex.build(location, _docs(), ENC, chunk_size=40)
    bad = [SourceDocument("bad", "text " * 50, {"score": float("nan")})]
    with pytest.raises(InputError, match="NaN"):
        MilvusIndex.build(location, bad, ENC, chunk_size=40, overwrite=True)
    assert len(MilvusIndex.open(location, client=first.client)) == count  # the failed rebuild changed nothing
    again = MilvusIndex.build(location, _docs(), ENC, chunk_size=40, overwrite=True)
    assert len(again) > count and sorted(again.client.list_collections()) == ["docs"]  # no temporary left


def test_add_appends_numbered_after_and_skips_known_documents(tmp_path):
    location = milvus_location(str(tmp_path / "grow.db"))
    index = MilvusIndex.build(location, _docs()[:2], ENC, chunk_size=40)
    before = len(index)
    assert index.add(_docs()[:2], ENC) == 0 and len(index) == before
    added = index.add([SourceDocument("new", "Zebras graze in the quiet meadow at dawn.", {"k": 1})], ENC)
    assert added == 1 and len(index) == before + 1
    record = index.records([before])[0]
    assert record["source"] == "new" and record["metadata"] == {"k": 1} and record["id"] == before
    assert index.bm25_search("zebras meadow", 1)[0].tolist() == [before]
    assert len(MilvusIndex.open(location, client=index.client)) == before + 1
    with pytest.raises(CollectionError, match="encoder"):
        index.add(_docs(), OtherEncoder())


def test_a_chunk_over_the_varchar_limit_is_refused_before_writing(tmp_path):
    location = milvus_location(str(tmp_path / "big.db"))
    with pytest.raises(InputError, match="VARCHAR limit"):
        MilvusIndex.build(location, [SourceDocument("big", "x" * 70_000, {})], ENC, chunk_size=40)


@pytest.mark.parametrize("url, uri, collection", [
    ("milvus://./corpus.db", "./corpus.db", "corpus"),
    ("milvus:///data/my-corpus.db?collection=docs", "/data/my-corpus.db", "docs"),
    ("milvus://data/2024.db", "data/2024.db", "c_2024"),
    ("milvus://localhost:19530", "http://localhost:19530", "meteora_edge"),
    ("milvus+https://db.example.org:443?collection=c1", "https://db.example.org:443", "c1"),
    ("milvus://[::1]:19530/", "http://[::1]:19530", "meteora_edge"),
])
def test_milvus_urls(url, uri, collection):
    location = parse_milvus_url(url)
    assert (location.uri, location.collection) == (uri, collection)
    assert parse_milvus_url(location.label) == location


@pytest.mark.parametrize("url", [
    "milvus://", "milvus://corpus", "milvus://host", "milvus://host:port", "milvus+https://./x.db",
    "milvus://./x.db?collection=a-b", "milvus://./x.db?colection=a", "milvus://./x.db?collection=a&collection=b",
    "milvus://./x.txt", "http://host:19530",
])
def test_bad_milvus_urls_are_one_line(url):
    with pytest.raises(InputError) as info:
        parse_milvus_url(url)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("uri", ["x.txt", "ftp://host:1", "http://host", "https://", ".db", "tcp://host:19530"])
def test_bad_uris_are_one_line(uri):
    with pytest.raises(InputError):
        milvus_location(uri)


def test_an_unreachable_server_is_one_line():
    with pytest.raises(CollectionError) as info:
        connect(milvus_location("http://127.0.0.1:1"), timeout=3)
    assert "cannot connect to Milvus at http://127.0.0.1:1" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("module, package", [("pymilvus", "pymilvus"), ("milvus_lite", "milvus-lite")])
def test_a_missing_extra_names_it(tmp_path, monkeypatch, module, package):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=rf"'{package}' is not installed.*meteora-edge\[milvus\]"):
        connect(milvus_location(str(tmp_path / "x.db")))
