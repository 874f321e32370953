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
from .embedded import DocumentSelector

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from pydantic import ConfigDict, Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "langchain_core", "langchain") from exc

__all__ = ["MeteoraCompressor"]

_RECORD_KEYS = ("rank", "id", "score", "score_name", "tokens", "scores", "via", "verdict")


class MeteoraCompressor(BaseDocumentCompressor):
    """Keeps the retrieved documents METEORA's selection and MeVe's phases choose (see the module doc).

    Args:
        bundle: a model bundle folder (its ONNX encoder, and its cross-encoder if any).
        encoder: an encoder object instead of a bundle's; neither: the hashing encoder.
        settings: pipeline settings by their ``PipelineConfig`` names (as ``select --chunks``).
        rationales, rationale_generator, verifier, tokenizer, detail, threads, precision:
            see :class:`~meteora_edge.integrations.embedded.DocumentSelector`.

    Raises:
        ConfigError, BundleError, MissingExtraError: bad settings or a bundle that cannot load.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bundle: Optional[str] = None
    encoder: Optional[Any] = None
    settings: Dict[str, Any] = Field(default_factory=dict)
    rationales: Optional[Any] = None
    rationale_generator: Optional[Any] = None
    verifier: Optional[Any] = None
    tokenizer: Optional[str] = None
    detail: str = "summary"
    threads: int = 1
    precision: str = "int8"
    _selector: DocumentSelector = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # built after pydantic's validation, so a bad setting raises ConfigError itself, not a ValidationError
        self._selector = DocumentSelector(
            bundle=self.bundle, encoder=self.encoder, settings=self.settings, rationales=self.rationales,
            rationale_generator=self.rationale_generator, verifier=self.verifier, tokenizer=self.tokenizer,
            detail=self.detail, threads=self.threads, precision=self.precision,
        )

    @property
    def last_report(self) -> Optional[Dict[str, Any]]:
        """``select``'s JSON object for this thread's last call."""
        return self._selector.last_report

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
