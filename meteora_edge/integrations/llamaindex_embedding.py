"""LlamaIndex: :class:`MeteoraEmbedding`, the ONNX encoder as a ``BaseEmbedding`` (extra ``[llamaindex]``).

Use it wherever LlamaIndex takes an embedding model, as ``FastEmbedEmbedding``::

    from llama_index.core import Settings, VectorStoreIndex
    from meteora_edge.integrations.llamaindex_embedding import MeteoraEmbedding

    Settings.embed_model = MeteoraEmbedding(bundle="models/bundles/default")
    index = VectorStoreIndex.from_documents(documents)

Batches follow ``embed_batch_size``; the async methods embed in a worker thread; LlamaIndex's
own instrumentation (embedding spans and events) applies as to any ``BaseEmbedding``.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

from ..errors import MissingExtraError
from ..models.encoders import encoder_id
from .encoder_embeddings import embed_lists, embedding_encoder

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "llama_index.core", "llamaindex") from exc

__all__ = ["MeteoraEmbedding"]


class MeteoraEmbedding(BaseEmbedding):
    """A bundle's ONNX encoder (or any encoder object) as a LlamaIndex ``BaseEmbedding``.

    Args:
        bundle: a model bundle folder; its encoder embeds.
        encoder: an encoder object instead (anything with ``encode(list[str])``); neither: hashing.
        threads, precision: the ONNX session's settings. Also ``BaseEmbedding``'s own
            (``embed_batch_size``, ``callback_manager``, …); ``model_name`` is the encoder's id.

    Raises:
        ConfigError: both ``bundle`` and ``encoder``. BundleError, ModelError: the bundle cannot load.
    """

    bundle: Optional[str] = None
    encoder: Optional[Any] = None
    threads: int = 1
    precision: str = "auto"
    _encoder: Any = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._encoder = embedding_encoder(self.bundle, self.encoder, threads=self.threads, precision=self.precision)
        self.model_name = encoder_id(self._encoder)

    @classmethod
    def class_name(cls) -> str:
        return "MeteoraEmbedding"

    def _get_query_embedding(self, query: str) -> Embedding:
        return embed_lists(self._encoder, [query])[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return embed_lists(self._encoder, [text])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[Embedding]:
        return embed_lists(self._encoder, texts)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await asyncio.to_thread(embed_lists, self._encoder, [query]))[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await asyncio.to_thread(embed_lists, self._encoder, [text]))[0]

    async def _aget_text_embeddings(self, texts: List[str]) -> List[Embedding]:
        return await asyncio.to_thread(embed_lists, self._encoder, texts)
