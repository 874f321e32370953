"""The LangChain compressor and the LlamaIndex node postprocessor, on the real packages: a
retrieval chain and a query engine run with them, keep what `select` keeps for the same chunks
and bundle, keep every document's metadata, leave the caller's objects alone, expose the
report, and need no network."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import textwrap

import pytest

from server_process import ROOT, child_env, cli_json
from serve_data import CHUNKS

from meteora_edge import HashingEncoder
from meteora_edge.errors import ConfigError, InputError

Q = "Who may terminate the agreement?"
SETTINGS = {"t_max": 14, "tau_relevance": 0.1}


def _cli_selection(bundle, chunks_file) -> dict:
    return cli_json("--bundle", str(bundle), "--chunks", str(chunks_file), "-q", Q, "--t-max", "14", "--tau", "0.1")


# -- LangChain ------------------------------------------------------------------------------

@pytest.fixture
def langchain_docs():
    documents = pytest.importorskip("langchain_core.documents")
    return [documents.Document(page_content=c["text"], metadata={"source": c["source"], **c["metadata"]}, id=f"d{i}")
            for i, c in enumerate(CHUNKS)]


def _list_retriever(docs):
    from langchain_core.retrievers import BaseRetriever

    class ListRetriever(BaseRetriever):
        """Returns its documents for any query: the tiny in-memory retriever of the chain."""

        documents: list

        def _get_relevant_documents(self, query, *, run_manager):
            return list(self.documents)

    return ListRetriever(documents=docs)


def test_a_langchain_retrieval_chain_keeps_what_select_keeps(langchain_docs, tiny_bundle, chunks_file):
    retrievers = pytest.importorskip("langchain_classic.retrievers")
    from meteora_edge.integrations.langchain_compressor import MeteoraCompressor

    before = copy.deepcopy(langchain_docs)
    compressor = MeteoraCompressor(bundle=str(tiny_bundle), settings=SETTINGS)
    chain = retrievers.ContextualCompressionRetriever(base_compressor=compressor,
                                                      base_retriever=_list_retriever(langchain_docs))
    kept = chain.invoke(Q)

    expected = _cli_selection(tiny_bundle, chunks_file)
    assert expected["passages"] and len(expected["passages"]) < len(CHUNKS)
    assert [d.page_content for d in kept] == [p["text"] for p in expected["passages"]]
    for doc, passage in zip(kept, expected["passages"]):
        original = langchain_docs[passage["id"]]
        assert doc.id == original.id and doc is not original
        assert doc.metadata == {**original.metadata, "relevance_score": passage["score"], "meteora_edge": {
            k: passage[k] for k in ("rank", "id", "score", "score_name", "tokens")}}
    assert [d.model_dump() for d in langchain_docs] == [d.model_dump() for d in before]  # untouched

    report = compressor.last_report
    assert report["passages"][0]["source"] == "terms.md" and report["encoder"] == expected["encoder"]
    assert [p["name"] for p in report["phases"]] == [p["name"] for p in expected["phases"]]
    assert report["phases"][2]["summary"] == expected["phases"][2]["summary"]  # the verify rung and counts


def test_the_full_detail_puts_the_trace_in_the_report_and_phase_scores_on_each_document(langchain_docs):
    from meteora_edge.integrations.langchain_compressor import MeteoraCompressor

    compressor = MeteoraCompressor(encoder=HashingEncoder(), settings={"tau_relevance": 0.0}, detail="full")
    kept, report = compressor.select(langchain_docs, Q)
    assert kept and {c["chunk_id"] for c in report["trace"]["candidates"]} == set(range(len(CHUNKS)))
    for doc in kept:
        record = doc.metadata["meteora_edge"]
        assert record["via"] == "selection" and record["verdict"] is None  # the cosine rung scores, an LLM judges
        assert record["chosen_by"] in ("pooled cut", "second-hop pair", "pair", "term cover", "token cover")
        assert record["scores"]["relevance"] >= 0.0 and record["scores"]["selection"] == record["score"]
    assert compressor.compress_documents([], Q) == []


@pytest.mark.parametrize("kwargs, error, message", [
    ({"settings": {"t_maxx": 3}}, ConfigError, "unknown pipeline setting(s) ['t_maxx']"),
    ({"settings": {"t_max": 0}}, ConfigError, "t_max must be an integer >= 1"),
    ({"detail": "everything"}, ConfigError, "detail must be 'summary' or 'full'"),
    ({"encoder": HashingEncoder(), "bundle": "b"}, ConfigError, "give a bundle or an encoder, not both"),
])
def test_bad_adapter_settings_are_refused_when_it_is_made(kwargs, error, message):
    pytest.importorskip("langchain_core")
    from meteora_edge.integrations.langchain_compressor import MeteoraCompressor

    with pytest.raises(error) as caught:
        MeteoraCompressor(**kwargs)
    assert message in str(caught.value)


# -- LlamaIndex -----------------------------------------------------------------------------

def _nodes():
    schema = pytest.importorskip("llama_index.core.schema")
    return [schema.NodeWithScore(node=schema.TextNode(text=c["text"], id_=f"n{i}",
                                                      metadata={"source": c["source"], **c["metadata"]}), score=0.5)
            for i, c in enumerate(CHUNKS)]


def test_a_llamaindex_query_engine_runs_with_the_postprocessor(tiny_bundle, chunks_file):
    nodes = _nodes()
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever

    from meteora_edge.integrations.llamaindex_postprocessor import MeteoraNodePostprocessor

    class ListRetriever(BaseRetriever):
        def _retrieve(self, query_bundle):
            return list(nodes)

    before = [(n.node.model_dump(), n.score) for n in nodes]
    postprocessor = MeteoraNodePostprocessor(bundle=str(tiny_bundle), settings=SETTINGS)
    engine = RetrieverQueryEngine.from_args(ListRetriever(), llm=MockLLM(), node_postprocessors=[postprocessor])
    response = engine.query(Q)

    expected = _cli_selection(tiny_bundle, chunks_file)
    kept = response.source_nodes
    assert [n.node.node_id for n in kept] == [f"n{p['id']}" for p in expected["passages"]]
    assert [n.score for n in kept] == [p["score"] for p in expected["passages"]]
    assert all(n.node is nodes[p["id"]].node for n, p in zip(kept, expected["passages"]))  # the same nodes
    assert [(n.node.model_dump(), n.score) for n in nodes] == before  # untouched
    assert all(p["text"] in str(response) for p in expected["passages"])  # the context the (mock) LLM got
    assert postprocessor.last_report["passages"][0]["metadata"]["source"] == "terms.md"

    direct = postprocessor.postprocess_nodes(nodes, query_str=Q)
    assert [n.node.node_id for n in direct] == [n.node.node_id for n in kept]
    with pytest.raises(InputError, match="needs the query"):
        postprocessor.postprocess_nodes(nodes)


def test_a_cut_node_is_a_copy_with_the_cut_text():
    nodes = _nodes()
    from meteora_edge.integrations.llamaindex_postprocessor import MeteoraNodePostprocessor

    postprocessor = MeteoraNodePostprocessor(settings={"t_max": 3, "oversize": "truncate", "rationales": "query"})
    kept = postprocessor.postprocess_nodes(nodes, query_str="the agreement ends after notice")
    assert kept and len(kept[0].node.text.split()) <= 3
    assert kept[0].node is not nodes[int(kept[0].node.node_id[1:])].node
    assert all(len(n.node.text.split()) > 3 for n in nodes)


# -- missing extras and no network ----------------------------------------------------------

@pytest.mark.parametrize("module, blocked, extra", [
    ("meteora_edge.integrations.langchain_compressor", "langchain_core", "langchain"),
    ("meteora_edge.integrations.llamaindex_postprocessor", "llama_index", "llamaindex"),
    ("meteora_edge.integrations.http_server", "uvicorn", "serve"),
])
def test_a_missing_extra_names_the_pip_install(module, blocked, extra):
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if it were not installed
        from meteora_edge.errors import MissingExtraError
        try:
            import {module}
        except MissingExtraError as exc:
            print(exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f'pip install "meteora-edge[{extra}]"' in proc.stdout


def test_import_meteora_edge_loads_no_server_and_no_framework():
    code = ("import sys, meteora_edge\n"
            "from meteora_edge import EvidencePipeline, PipelineConfig\n"
            "bad = [m for m in sys.modules if m.startswith(('meteora_edge.integrations', 'starlette', 'uvicorn',"
            " 'langchain', 'llama_index'))]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_both_adapters_run_with_networking_made_impossible():
    pytest.importorskip("llama_index.core")
    pytest.importorskip("langchain_classic")
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("needs unshare -n (a network namespace without interfaces)")
    code = textwrap.dedent(f"""
        from langchain_core.documents import Document
        from langchain_core.retrievers import BaseRetriever
        from langchain_classic.retrievers import ContextualCompressionRetriever
        from llama_index.core.llms import MockLLM
        from llama_index.core.query_engine import RetrieverQueryEngine
        from llama_index.core.retrievers import BaseRetriever as NodeRetriever
        from llama_index.core.schema import NodeWithScore, TextNode
        from meteora_edge.integrations.langchain_compressor import MeteoraCompressor
        from meteora_edge.integrations.llamaindex_postprocessor import MeteoraNodePostprocessor

        texts = {[c["text"] for c in CHUNKS]!r}

        class Docs(BaseRetriever):
            def _get_relevant_documents(self, query, *, run_manager):
                return [Document(page_content=t) for t in texts]

        class Nodes(NodeRetriever):
            def _retrieve(self, query_bundle):
                return [NodeWithScore(node=TextNode(text=t), score=1.0) for t in texts]

        chain = ContextualCompressionRetriever(base_compressor=MeteoraCompressor(), base_retriever=Docs())
        engine = RetrieverQueryEngine.from_args(Nodes(), llm=MockLLM(), node_postprocessors=[MeteoraNodePostprocessor()])
        print(len(chain.invoke({Q!r})), len(engine.query({Q!r}).source_nodes))
    """)
    env = {k: v for k, v in child_env().items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    proc = subprocess.run(["unshare", "-n", sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    kept_docs, kept_nodes = map(int, proc.stdout.split())
    assert kept_docs == kept_nodes >= 1
