"""LangChain: :class:`MeteoraCompressor`, a document compressor (extra ``[langchain]``: langchain-core).

Put it behind any retriever, as a built-in reranker (``CohereRerank``, ``FlashrankRerank``); it
keeps the documents ``select`` would keep, best first::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from meteora_edge.integrations.langchain_compressor import MeteoraCompressor

    compressor = MeteoraCompressor(bundle="models/bundles/default", settings={"t_max": 300}, top_n=3)
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=my_retriever)
    docs = retriever.invoke("How can the agreement be terminated?")       # or: await retriever.ainvoke(...)

Each returned document is a copy of the retrieved one: the same ``page_content`` (cut to fit
``t_max`` only when the budget cuts it), ``id`` and ``metadata``, plus
``metadata["relevance_score"]`` (its score, as the built-in rerankers put it) and
``metadata["meteora_edge"]`` holding its passage record (``rank``, ``id`` — its position among
the retrieved documents —, ``score``, ``score_name``, ``tokens``; with ``detail="full"`` also
``scores``, ``via``, ``chosen_by`` and ``verdict``). The retrieved documents are never modified; a document
with empty ``page_content`` is skipped with a logged warning. ``top_n`` and ``score_threshold``
cut the pipeline's choice further.

The report of a call (``select``'s JSON object: phases, rationales, ``adapter``; with
``detail="full"`` the trace) comes back from :meth:`MeteoraCompressor.select` /
:meth:`~MeteoraCompressor.aselect`, and goes to the call's LangChain callbacks as the custom
event :data:`REPORT_EVENT` (``on_custom_event(name, data, run_id=…)``), so concurrent calls
never mix reports. ``compressor.last_report`` is the last report of this thread or asyncio task.
``acompress_documents`` runs the selection in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Dict, List, Optional, Tuple

from ..errors import MissingExtraError
from .adapter_model import Kept, SelectorModel

try:
    from langchain_core.callbacks import AsyncCallbackManager, CallbackManager, Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "langchain_core", "langchain") from exc

__all__ = ["MeteoraCompressor", "REPORT_EVENT"]

#: The custom callback event each call sends with its report as ``data``.
REPORT_EVENT = "meteora_edge_report"
_RECORD_KEYS = ("rank", "id", "score", "score_name", "tokens", "scores", "via", "chosen_by", "verdict")


class MeteoraCompressor(SelectorModel, BaseDocumentCompressor):
    """Keeps the retrieved documents METEORA's selection and MeVe's phases choose (see the module doc).

    Takes :class:`~meteora_edge.integrations.adapter_model.SelectorModel`'s fields (``bundle`` or
    ``encoder``, ``settings`` by ``PipelineConfig`` name, ``top_n``, ``score_threshold``,
    ``detail``, …); a bad one raises ``ConfigError`` when the compressor is made.
    """

    def select(self, documents: Sequence[Document], query: str) -> Tuple[List[Document], Dict[str, Any]]:
        """The kept documents (copies, best first) and this call's report.

        Raises:
            InputError: an empty query.
            ModelError: a model failed.
        """
        kept = self.keep(query, documents, [d.page_content for d in documents])
        self.remember(kept)
        return _copies(kept, documents), kept.report

    async def aselect(self, documents: Sequence[Document], query: str) -> Tuple[List[Document], Dict[str, Any]]:
        """:meth:`select` with the selection in a worker thread, off the event loop."""
        kept = await asyncio.to_thread(self.keep, query, documents, [d.page_content for d in documents])
        self.remember(kept)
        return _copies(kept, documents), kept.report

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Optional[Callbacks] = None
    ) -> Sequence[Document]:
        """The documents the pipeline keeps for ``query``, best first; the report goes to ``callbacks``."""
        out, report = self.select(documents, query)
        manager = CallbackManager.configure(inheritable_callbacks=callbacks)
        if report and manager.handlers:
            manager.on_custom_event(REPORT_EVENT, report, run_id=manager.parent_run_id)
        return out

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Optional[Callbacks] = None
    ) -> Sequence[Document]:
        """:meth:`compress_documents` without blocking the event loop (the selection runs in a thread)."""
        out, report = await self.aselect(documents, query)
        manager = AsyncCallbackManager.configure(inheritable_callbacks=callbacks)
        if report and manager.handlers:
            await manager.on_custom_event(REPORT_EVENT, report, run_id=manager.parent_run_id)
        return out


def _copies(kept: Kept, documents: Sequence[Document]) -> List[Document]:
    """Copies of the kept documents with their score and record in the metadata (the originals untouched)."""
    out = []
    for position, record in zip(kept.positions, kept.records):
        original = documents[position]
        metadata = {**original.metadata, "relevance_score": record["score"],
                    "meteora_edge": {k: record[k] for k in _RECORD_KEYS if k in record}}
        update: Dict[str, Any] = {"metadata": metadata}
        if record["text"] != original.page_content:
            update["page_content"] = record["text"]
        out.append(original.model_copy(update=update))
    return out
