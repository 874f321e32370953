"""MeteoraRanker in a real Haystack 2 pipeline: a BM25 retriever over an in-memory store feeds it,
and it passes on the documents /v1/select keeps for the same texts, with their scores in meta."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no usage reports from an offline test
haystack = pytest.importorskip("haystack")

from haystack import Document, Pipeline  # noqa: E402
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever  # noqa: E402
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402

from meteora_edge.errors import ConfigError  # noqa: E402
from meteora_edge.integrations.haystack_ranker import MeteoraRanker  # noqa: E402
from meteora_edge.integrations.service import SelectService  # noqa: E402
from serve_data import CHUNKS  # noqa: E402

QUERY = "Who may terminate the agreement?"


def make_pipeline(ranker: MeteoraRanker) -> tuple[Pipeline, list[Document]]:
    store = InMemoryDocumentStore()
    documents = [Document(content=c["text"], meta={"source": c["source"]}) for c in CHUNKS]
    store.write_documents(documents)
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=10))
    pipeline.add_component("ranker", ranker)
    pipeline.connect("retriever.documents", "ranker.documents")
    return pipeline, documents


def test_in_a_pipeline_it_keeps_what_select_keeps_with_scores_in_meta(tiny_bundle):
    pipeline, _ = make_pipeline(MeteoraRanker(bundle=str(tiny_bundle)))
    result = pipeline.run({"retriever": {"query": QUERY}, "ranker": {"query": QUERY}},
                          include_outputs_from={"retriever"})
    retrieved, kept = result["retriever"]["documents"], result["ranker"]["documents"]
    texts = [d.content for d in retrieved]
    expected = SelectService.load(bundle=str(tiny_bundle)).select({"query": QUERY, "chunks": texts})["passages"]
    assert 0 < len(kept) < len(retrieved)
    assert [d.content for d in kept] == [p["text"] for p in expected]
    assert [d.score for d in kept] == [p["score"] for p in expected]
    for doc in kept:
        record = doc.meta["meteora_edge"]
        original = retrieved[record["id"]]
        assert doc.id == original.id and doc.meta["source"] == original.meta["source"]
        assert record["score"] == doc.score and record["score_name"] and record["rank"] >= 1
        assert "meteora_edge" not in original.meta  # the inputs are untouched
    assert result["ranker"]["report"]["passages"][0]["text"] == kept[0].content


def test_top_k_budget_serialisation_and_bad_settings(tiny_bundle):
    ranker = MeteoraRanker(bundle=str(tiny_bundle), settings={"t_max": 4})
    _, documents = make_pipeline(ranker)
    cut = ranker.run(query=QUERY, documents=documents)["documents"]
    assert sum(d.meta["meteora_edge"]["tokens"] for d in cut) <= 4
    assert len(ranker.run(query=QUERY, documents=documents, top_k=1)["documents"]) <= 1
    pipeline, _ = make_pipeline(MeteoraRanker(bundle=str(tiny_bundle), top_k=1))
    again = Pipeline.loads(pipeline.dumps(), allowed_modules=["meteora_edge.integrations.haystack_ranker"])
    assert again.get_component("ranker").init == {**MeteoraRanker(bundle=str(tiny_bundle)).init, "top_k": 1}
    out = again.run({"retriever": {"query": QUERY}, "ranker": {"query": QUERY}})["ranker"]["documents"]
    assert len(out) == 1
    with pytest.raises(ConfigError, match="t_max"):
        MeteoraRanker(settings={"t_max": -3}).warm_up()
    assert MeteoraRanker().run(query=QUERY, documents=[Document(content="")])["documents"] == []
