"""LangChain: :class:`MeteoraEmbeddings`, the ONNX encoder as ``Embeddings`` (extra ``[langchain]``).

Any vector store takes it, as it takes ``FastEmbedEmbeddings``::

    from langchain_core.vectorstores import InMemoryVectorStore
    from meteora_edge.integrations.langchain_embeddings import MeteoraEmbeddings

    embeddings = MeteoraEmbeddings(bundle="models/bundles/default")
    store = InMemoryVectorStore.from_texts(["Either party may terminate."], embeddings)
    vector = embeddings.embed_query("who may terminate?")             # or: await embeddings.aembed_query(...)

The vectors are the ones ``index build`` stores (L2-normalised for a bundle's encoder), so a
store built with it and ``select`` agree. The async methods embed in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

from ..errors import MissingExtraError
from .encoder_embeddings import embed_lists, embedding_encoder

try:
    from langchain_core.embeddings import Embeddings
    from pydantic import BaseModel, ConfigDict, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "langchain_core", "langchain") from exc

__all__ = ["MeteoraEmbeddings"]


class MeteoraEmbeddings(BaseModel, Embeddings):
    """A bundle's ONNX encoder (or any encoder object) as LangChain ``Embeddings``.

    Args:
        bundle: a model bundle folder; its encoder embeds.
        encoder: an encoder object instead (anything with ``encode(list[str])``); neither: hashing.
        threads, precision: the ONNX session's settings (see ``OnnxEncoder.from_bundle``).

    Raises:
        ConfigError: both ``bundle`` and ``encoder``. BundleError, ModelError: the bundle cannot load.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bundle: Optional[str] = None
    encoder: Optional[Any] = None
    threads: int = 1
    precision: str = "auto"
    _encoder: Any = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._encoder = embedding_encoder(self.bundle, self.encoder, threads=self.threads, precision=self.precision)

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        """One vector per text, in one batched encoder call."""
        return embed_lists(self._encoder, texts)

    def embed_query(self, text: str) -> List[float]:
        """The query's vector."""
        return embed_lists(self._encoder, [text])[0]

    async def aembed_documents(self, texts: List[str]) -> List[List[float]]:
        """:meth:`embed_documents` in a worker thread, off the event loop."""
        return await asyncio.to_thread(embed_lists, self._encoder, texts)

    async def aembed_query(self, text: str) -> List[float]:
        """:meth:`embed_query` in a worker thread, off the event loop."""
        return (await asyncio.to_thread(embed_lists, self._encoder, [text]))[0]
