"""The ONNX encoder as LangChain ``Embeddings`` and LlamaIndex ``BaseEmbedding``, with the real
MiniLM int8 encoder (assembled from its PyPI packages by ``models install``, no torch): the same
vectors as the encoder itself, sync = async = batch, and a vector store / index that finds the
right text."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import ConfigError, InputError

TEXTS = ["Either party may terminate the agreement with thirty days notice.",
         "Invoices are payable within fourteen days.",
         "Bananas are yellow and grow in bunches."]
QUERY = "How can the contract be ended?"


@pytest.fixture(scope="module")
def reference(minilm: Path) -> np.ndarray:
    from meteora_edge.models.onnx_encoder import load_encoder

    return load_encoder(str(minilm)).encode(TEXTS + [QUERY])


def test_langchain_embeddings_match_the_encoder_and_find_the_right_text(minilm, reference):
    pytest.importorskip("langchain_core")
    from langchain_core.vectorstores import InMemoryVectorStore

    from meteora_edge.integrations.langchain_embeddings import MeteoraEmbeddings

    embeddings = MeteoraEmbeddings(bundle=str(minilm))
    documents = embeddings.embed_documents(TEXTS)
    query = embeddings.embed_query(QUERY)
    assert len(documents) == 3 and all(len(v) == 384 for v in documents) and isinstance(query[0], float)
    np.testing.assert_allclose(np.array(documents + [query]), reference, atol=1e-5)
    np.testing.assert_allclose(asyncio.run(embeddings.aembed_documents(TEXTS)), documents, atol=1e-6)
    np.testing.assert_allclose(asyncio.run(embeddings.aembed_query(QUERY)), query, atol=1e-6)
    assert embeddings.embed_documents([]) == []

    store = InMemoryVectorStore.from_texts(TEXTS, embeddings)
    assert store.similarity_search(QUERY, k=1)[0].page_content == TEXTS[0]


def test_llamaindex_embedding_matches_the_encoder_in_batches_and_async(minilm, reference):
    pytest.importorskip("llama_index.core")
    from meteora_edge.integrations.llamaindex_embedding import MeteoraEmbedding

    model = MeteoraEmbedding(bundle=str(minilm), embed_batch_size=2)
    assert model.model_name.startswith("onnx:")
    batch = model.get_text_embedding_batch(TEXTS)  # two batches of at most 2
    np.testing.assert_allclose(np.array(batch), reference[:3], atol=1e-5)
    np.testing.assert_allclose(model.get_query_embedding(QUERY), reference[3], atol=1e-5)
    np.testing.assert_allclose(asyncio.run(model.aget_text_embedding_batch(TEXTS)), batch, atol=1e-6)
    np.testing.assert_allclose(asyncio.run(model.aget_query_embedding(QUERY)), reference[3], atol=1e-5)
    similarities = [model.similarity(model.get_query_embedding(QUERY), v) for v in batch]
    assert int(np.argmax(similarities)) == 0


def test_a_llamaindex_vector_index_built_with_it_retrieves_the_right_node(minilm):
    pytest.importorskip("llama_index.core")
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode

    from meteora_edge.integrations.llamaindex_embedding import MeteoraEmbedding

    index = VectorStoreIndex([TextNode(text=t) for t in TEXTS], embed_model=MeteoraEmbedding(bundle=str(minilm)))
    [best] = index.as_retriever(similarity_top_k=1).retrieve(QUERY)
    assert best.node.text == TEXTS[0]


def test_bad_settings_and_inputs_get_one_line_errors():
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from meteora_edge.integrations.langchain_embeddings import MeteoraEmbeddings
    from meteora_edge.integrations.llamaindex_embedding import MeteoraEmbedding

    for cls in (MeteoraEmbeddings, MeteoraEmbedding):
        with pytest.raises(ConfigError, match="give a bundle or an encoder, not both"):
            cls(bundle="b", encoder=HashingEncoder())
    with pytest.raises(InputError, match="texts must be strings, got int at position 1"):
        MeteoraEmbeddings().embed_documents(["a", 3])  # type: ignore[list-item]
    hashing = MeteoraEmbedding()
    assert hashing.model_name == "hashing:384" and len(hashing.get_text_embedding("a")) == 384
