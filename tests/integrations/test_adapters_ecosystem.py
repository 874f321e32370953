"""The adapters as the ecosystem's own rerankers behave, inside a real ContextualCompressionRetriever
and a real RetrieverQueryEngine, sync and async: ``top_n`` and ``score_threshold``, the relevance
score where the built-ins put it, the retrieval score kept, the report of *this* call (returned,
sent as a callback / instrumentation event, ``last_report`` per task), documents without text
skipped, and the selection off the event loop."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from serve_data import CHUNKS

from meteora_edge import HashingEncoder
from meteora_edge.errors import ConfigError

pytest.importorskip("langchain_classic")
pytest.importorskip("llama_index.core")

from langchain_classic.retrievers import ContextualCompressionRetriever  # noqa: E402
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.instrumentation.event_handlers import BaseEventHandler  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.retrievers import BaseRetriever as NodeRetriever  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode  # noqa: E402

from meteora_edge.integrations.langchain_compressor import REPORT_EVENT, MeteoraCompressor  # noqa: E402
from meteora_edge.integrations.llamaindex_postprocessor import (  # noqa: E402
    MeteoraNodePostprocessor,
    MeteoraReportEvent,
)

Q1 = "Who may terminate the agreement?"
Q2 = "When are the fees due?"
SETTINGS = {"use_ecse": False, "tau_relevance": 0.0}  # no ECSE cut, every chunk passes the cosine rung: several kept


def _docs(texts=None) -> list:
    texts = [c["text"] for c in CHUNKS] if texts is None else texts
    return [Document(page_content=t, metadata={"n": i}, id=f"d{i}") for i, t in enumerate(texts)]


class _Docs(BaseRetriever):
    documents: list

    def _get_relevant_documents(self, query, *, run_manager):
        return list(self.documents)


class _Reports(BaseCallbackHandler):
    """Collects the compressor's report events (LangChain calls sync handlers from any thread)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def on_custom_event(self, name, data, *, run_id, **kwargs):
        self.events.append((name, data))


def _chain(compressor, docs):
    return ContextualCompressionRetriever(base_compressor=compressor, base_retriever=_Docs(documents=docs))


# -- LangChain ------------------------------------------------------------------------------

def test_top_n_keeps_the_best_of_what_the_pipeline_keeps_with_relevance_score_in_the_metadata():
    docs = _docs()
    every = MeteoraCompressor(encoder=HashingEncoder(), settings=SETTINGS).select(docs, Q1)[0]
    assert len(every) >= 3  # so a top_n of 2 really cuts
    chain = _chain(MeteoraCompressor(encoder=HashingEncoder(), settings=SETTINGS, top_n=2), docs)
    kept = chain.invoke(Q1)
    assert [d.id for d in kept] == [d.id for d in every[:2]]
    for doc in kept:
        assert doc.metadata["relevance_score"] == doc.metadata["meteora_edge"]["score"]
        assert doc.metadata["n"] == int(doc.id[1:]) and "relevance_score" not in docs[doc.metadata["n"]].metadata
    assert kept[0].metadata["relevance_score"] >= kept[1].metadata["relevance_score"]


def test_score_threshold_drops_the_documents_below_it():
    docs = _docs()
    every = MeteoraCompressor(encoder=HashingEncoder(), settings=SETTINGS).select(docs, Q1)[0]
    scores = [d.metadata["relevance_score"] for d in every]
    assert len(set(scores)) > 1
    threshold = sorted(scores)[len(scores) // 2]
    kept, report = MeteoraCompressor(encoder=HashingEncoder(), settings=SETTINGS,
                                     score_threshold=threshold).select(docs, Q1)
    assert [d.id for d in kept] == [d.id for d in every if d.metadata["relevance_score"] >= threshold]
    assert len(kept) < len(every)
    assert [p["id"] for p in report["passages"]] == [d.metadata["n"] for d in kept]
    assert report["adapter"] == {"top_n": None, "score_threshold": threshold, "skipped": []}


def test_each_call_sends_its_own_report_to_its_callbacks_sync_and_async():
    compressor = MeteoraCompressor(encoder=HashingEncoder(), settings=SETTINGS, top_n=1)
    chain = _chain(compressor, _docs())
    sync_reports, async_reports = _Reports(), _Reports()
    sync_kept = chain.invoke(Q1, config={"callbacks": [sync_reports]})
    async_kept = asyncio.run(chain.ainvoke(Q2, config={"callbacks": [async_reports]}))
    [(name, report)] = sync_reports.events
    assert name == REPORT_EVENT and report["query"] == Q1
    assert [p["id"] for p in report["passages"]] == [sync_kept[0].metadata["n"]]
    [(name, report)] = async_reports.events
    assert name == REPORT_EVENT and report["query"] == Q2
    assert [p["id"] for p in report["passages"]] == [async_kept[0].metadata["n"]]
    assert sync_kept[0].id != async_kept[0].id  # two questions, two answers


class _Recording(HashingEncoder):
    """The hashing encoder, noting the thread of each call."""

    threads: list[int] = []

    def encode(self, texts):
        self.threads.append(threading.get_ident())
        return super().encode(texts)


def test_concurrent_async_calls_each_see_their_own_report_and_run_off_the_event_loop():
    threads = _Recording.threads
    threads.clear()
    compressor = MeteoraCompressor(encoder=_Recording(), settings=SETTINGS)
    chain = _chain(compressor, _docs())

    async def one(query):
        handler = _Reports()
        docs = await chain.ainvoke(query, config={"callbacks": [handler]})
        return query, docs, compressor.last_report, handler.events

    async def both():
        loop_thread = threading.get_ident()
        return loop_thread, await asyncio.gather(*(one(q) for q in (Q1, Q2, Q1, Q2)))

    loop_thread, results = asyncio.run(both())
    for query, docs, last, events in results:
        assert last["query"] == query and [e[1]["query"] for e in events] == [query]
        assert [p["id"] for p in last["passages"]] == [d.metadata["n"] for d in docs]
    assert threads and loop_thread not in threads  # every encoder call ran in a worker thread
    assert compressor.last_report is None  # the tasks' reports stay in the tasks


def test_documents_without_text_are_skipped_with_a_warning(caplog):
    texts = [c["text"] for c in CHUNKS]
    docs = _docs([texts[0], "", texts[1], "   \n", texts[3]])
    with caplog.at_level(logging.WARNING, logger="meteora_edge.integrations.adapter_model"):
        kept = _chain(MeteoraCompressor(encoder=HashingEncoder(), settings=SETTINGS), docs).invoke(Q1)
    assert "skipped 2 document(s) without text at position(s) [1, 3]" in caplog.text
    assert kept and {d.id for d in kept} <= {"d0", "d2", "d4"}
    for doc in kept:  # ids in the records are positions in the caller's list, empty ones counted
        assert doc.metadata["meteora_edge"]["id"] == doc.metadata["n"]
    only_empty = MeteoraCompressor(encoder=HashingEncoder())
    kept, report = only_empty.select(_docs(["", " "]), Q1)
    assert kept == [] and report["passages"] == [] and report["adapter"]["skipped"] == [0, 1]


@pytest.mark.parametrize("kwargs, message", [
    ({"top_n": 0}, "top_n must be an integer >= 1 or None, got 0"),
    ({"top_n": True}, "top_n must be an integer >= 1 or None, got True"),
    ({"top_n": "3"}, "top_n must be an integer >= 1 or None, got '3'"),
    ({"score_threshold": "high"}, "score_threshold must be a number or None, got 'high'"),
    ({"score_threshold": float("nan")}, "score_threshold must be a number or None, got nan"),
])
@pytest.mark.parametrize("adapter", [MeteoraCompressor, MeteoraNodePostprocessor])
def test_bad_top_n_or_threshold_is_refused_when_the_adapter_is_made(adapter, kwargs, message):
    with pytest.raises(ConfigError) as caught:
        adapter(**kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize("adapter", [MeteoraCompressor, MeteoraNodePostprocessor])
def test_rejection_rules_without_an_llm_role_are_refused_when_the_adapter_is_made(adapter):
    from meteora_edge.pipeline.request import RequestError

    with pytest.raises(RequestError, match="'reject' rules are applied by the LLM; add 'verify' or 'llm_rerank'"):
        adapter(reject="draft notes")


# -- LlamaIndex -----------------------------------------------------------------------------

def _nodes(texts=None) -> list[NodeWithScore]:
    texts = [c["text"] for c in CHUNKS] if texts is None else texts
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}", metadata={"n": i}), score=0.1 * (i + 1))
            for i, t in enumerate(texts)]


class _Nodes(NodeRetriever):
    def __init__(self, nodes):
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle):
        return list(self.nodes)


class _Events(BaseEventHandler):
    """Collects the instrumentation events of this module's dispatcher."""

    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "_Events"

    def handle(self, event, **kwargs):
        self.events.append(event)


@pytest.fixture
def events():
    handler = _Events(events=[])
    dispatcher = get_dispatcher("meteora_edge.integrations.llamaindex_postprocessor")
    dispatcher.add_event_handler(handler)
    yield handler.events
    dispatcher.event_handlers.remove(handler)


def test_a_query_engine_gets_the_relevance_as_score_and_keeps_the_retrieval_score(events):
    nodes = _nodes()
    before = [(n.node.model_dump(), n.score) for n in nodes]
    postprocessor = MeteoraNodePostprocessor(encoder=HashingEncoder(), settings=SETTINGS, top_n=2,
                                             keep_retrieval_score=True)
    engine = RetrieverQueryEngine.from_args(_Nodes(nodes), llm=MockLLM(), node_postprocessors=[postprocessor])
    response = engine.query(Q1)
    kept = response.source_nodes
    report = postprocessor.last_report
    assert len(kept) == 2 and [n.score for n in kept] == [p["score"] for p in report["passages"]]
    for node, passage in zip(kept, report["passages"]):
        given = nodes[passage["id"]]
        assert node.node.node_id == given.node.node_id and node.node is not given.node
        assert node.node.metadata == {"n": passage["id"], "retrieval_score": given.score}
        assert "retrieval_score" not in node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert [(n.node.model_dump(), n.score) for n in nodes] == before  # untouched

    [start] = [e for e in events if e.class_name() == "ReRankStartEvent"]
    assert start.top_n == 2 and start.model_name == "meteora-edge:HashingEncoder"
    [end] = [e for e in events if e.class_name() == "ReRankEndEvent"]
    assert [n.node.node_id for n in end.nodes] == [n.node.node_id for n in kept]
    [sent] = [e for e in events if isinstance(e, MeteoraReportEvent)]
    assert sent.report == report and sent.span_id  # inside the postprocessor's span

    plain = MeteoraNodePostprocessor(encoder=HashingEncoder(), settings=SETTINGS, top_n=2).postprocess_nodes(
        nodes, query_str=Q1)
    assert [n.node is nodes[int(n.node.node_id[1:])].node for n in plain] == [True, True]  # no copy without it


def test_concurrent_aquery_calls_each_get_their_own_report_event_and_last_report(events):
    postprocessor = MeteoraNodePostprocessor(encoder=_Recording(), settings=SETTINGS, top_n=1)
    engine = RetrieverQueryEngine.from_args(_Nodes(_nodes()), llm=MockLLM(), node_postprocessors=[postprocessor])

    async def one(query):
        response = await engine.aquery(query)
        return query, response.source_nodes, postprocessor.last_report

    async def all_of_them():
        return threading.get_ident(), await asyncio.gather(*(one(q) for q in (Q1, Q2, Q1, Q2)))

    _Recording.threads.clear()
    loop_thread, results = asyncio.run(all_of_them())
    assert _Recording.threads and loop_thread not in _Recording.threads  # the selection ran in worker threads
    for query, kept, last in results:
        assert last["query"] == query and [p["id"] for p in last["passages"]] == [n.node.metadata["n"] for n in kept]
    assert results[0][1][0].node.node_id != results[1][1][0].node.node_id
    sent = [e.report["query"] for e in events if isinstance(e, MeteoraReportEvent)]
    assert sorted(sent) == sorted([Q1, Q2, Q1, Q2])
    assert postprocessor.last_report is None


def test_nodes_without_text_are_skipped_with_a_warning(caplog):
    texts = [c["text"] for c in CHUNKS]
    nodes = _nodes(["", texts[0], texts[1]])
    postprocessor = MeteoraNodePostprocessor(encoder=HashingEncoder(), settings=SETTINGS)
    with caplog.at_level(logging.WARNING, logger="meteora_edge.integrations.adapter_model"):
        kept = asyncio.run(postprocessor.apostprocess_nodes(nodes, query_str=Q1))
    assert "skipped 1 document(s) without text at position(s) [0]" in caplog.text
    assert kept and {n.node.node_id for n in kept} <= {"n1", "n2"}
    assert postprocessor.last_report is None  # asyncio.run ran it in its own task
    kept, report = postprocessor.select(nodes, Q1)
    assert report["adapter"]["skipped"] == [0] and [p["id"] for p in report["passages"]] == [
        n.node.metadata["n"] for n in kept]


def test_the_legacy_callback_manager_gets_a_reranking_event_pair_sync_and_async():
    from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload, LlamaDebugHandler

    debug = LlamaDebugHandler()
    postprocessor = MeteoraNodePostprocessor(encoder=HashingEncoder(), settings=SETTINGS, top_n=2,
                                             callback_manager=CallbackManager([debug]))
    nodes = _nodes()
    kept = postprocessor.postprocess_nodes(nodes, query_str=Q1)
    asyncio.run(postprocessor.apostprocess_nodes(nodes, query_str=Q2))
    pairs = debug.get_event_pairs(CBEventType.RERANKING)
    assert len(pairs) == 2
    start, end = pairs[0]
    assert start.payload[EventPayload.QUERY_STR] == Q1 and start.payload[EventPayload.TOP_K] == 2
    assert start.payload[EventPayload.MODEL_NAME] == "meteora-edge:HashingEncoder"
    assert [n.node.node_id for n in end.payload[EventPayload.NODES]] == [n.node.node_id for n in kept]
    assert pairs[1][0].payload[EventPayload.QUERY_STR] == Q2
