"""LangChain: :class:`MeteoraCompressor`, a document compressor (extra ``[langchain]``: langchain-core).

Put it behind any retriever; it keeps the documents ``select`` would keep, best first::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from meteora_edge.integrations.langchain_compressor import MeteoraCompressor

    compressor = MeteoraCompressor(bundle="models/bundles/default", settings={"t_max": 300})
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=my_retriever)
    docs = retriever.invoke("How can the agreement be terminated?")

Each returned document is a copy of the retrieved one: the same ``page_content`` (cut to fit
``t_max`` only with ``oversize="truncate"``), ``id`` and ``metadata``, plus
``metadata["meteora_edge"]`` holding its passage record (``rank``, ``id`` — its position among
the retrieved documents —, ``score``, ``score_name``, ``tokens``; with ``detail="full"`` also
``scores``, ``via`` and ``verdict``). The retrieved documents are never modified. The whole
report (``select``'s JSON object: phases, rationales, with ``detail="full"`` the trace) is
``compressor.last_report`` (per thread) or the second value of :meth:`MeteoraCompressor.select`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Dict, List, Optional, Tuple

from ..errors import MissingExtraError
from .adapter_model import SelectorModel

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "langchain_core", "langchain") from exc

__all__ = ["MeteoraCompressor"]

_RECORD_KEYS = ("rank", "id", "score", "score_name", "tokens", "scores", "via", "verdict")


class MeteoraCompressor(SelectorModel, BaseDocumentCompressor):
    """Keeps the retrieved documents METEORA's selection and MeVe's phases choose (see the module doc).

    Takes :class:`~meteora_edge.integrations.adapter_model.SelectorModel`'s fields (``bundle`` or
    ``encoder``, ``settings`` by ``PipelineConfig`` name, ``detail``, …); a bad one raises
    ``ConfigError`` when the compressor is made.
    """

    def select(self, documents: Sequence[Document], query: str) -> Tuple[List[Document], Dict[str, Any]]:
        """The kept documents (copies, best first) and the report.

        Raises:
            InputError: an empty query or a document without text.
            ModelError: a model failed.
        """
        kept = self._selector.select(query, documents)
        out = []
        for position, record in zip(kept.positions, kept.records):
            original = documents[position]
            update: Dict[str, Any] = {"metadata": {**original.metadata, "meteora_edge": {
                k: record[k] for k in _RECORD_KEYS if k in record}}}
            if record["text"] != original.page_content:
                update["page_content"] = record["text"]
            out.append(original.model_copy(update=update))
        return out, kept.report

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Optional[Callbacks] = None
    ) -> Sequence[Document]:
        """The documents the pipeline keeps for ``query``, best first (see :meth:`select`)."""
        return self.select(documents, query)[0]
