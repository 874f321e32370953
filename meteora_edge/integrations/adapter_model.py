"""The fields both framework adapters take, as one pydantic model they inherit, and the per-call work they share.

LangChain's and LlamaIndex's base classes are pydantic models, so an adapter is
``class Adapter(SelectorModel, FrameworkBase)``: the fields below, a
:class:`~meteora_edge.integrations.embedded.DocumentSelector` built from them once the
model is validated (a bad setting raises ``ConfigError`` itself, not a pydantic
``ValidationError``), :meth:`SelectorModel.keep` (one call: skip the documents without text,
select, then ``score_threshold`` and ``top_n``) and :attr:`SelectorModel.last_report`.

A call keeps no state on the adapter: :meth:`keep` returns its own :class:`Kept`, and
``last_report`` lives in a :class:`contextvars.ContextVar` — per thread, and per asyncio task
for the async entry points, which run the selection in a worker thread and set it in the
caller's task — so concurrent calls never see each other's report.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..errors import ConfigError, MissingExtraError
from .embedded import DocumentSelector, Selection

try:
    from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
except ImportError as exc:  # pragma: no cover - both frameworks depend on pydantic
    raise MissingExtraError("pydantic", "langchain") from exc

__all__ = ["Kept", "SelectorModel"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kept:
    """What one adapter call kept: ``positions`` in the caller's list (best first), their passage
    ``records`` (``id`` = that position) and the call's ``report`` (``select``'s JSON object, its
    ``passages`` the kept ones, plus ``adapter``: ``top_n``, ``score_threshold``, ``skipped``)."""

    positions: List[int]
    records: List[Dict[str, Any]]
    report: Dict[str, Any]


class SelectorModel(BaseModel):
    """The adapters' settings.

    Args:
        bundle: a model bundle folder (its ONNX encoder, and its cross-encoder if any).
        encoder: an encoder object instead of a bundle's; neither: the hashing encoder.
        settings: pipeline settings by their ``PipelineConfig`` names (as ``select --chunks``).
        top_n: keep at most this many documents, best first (None: all the pipeline keeps).
        score_threshold: keep only documents whose score (the report's ``score_name``: the
            cross-encoder's probability, ECSE's selection score or the retrieval score) is at
            least this (None: no threshold).
        rationales, rationale_generator, verifier, tokenizer, detail, threads, precision, runtime, llm_rerank,
        reject: see :class:`~meteora_edge.integrations.embedded.DocumentSelector`.

    Raises:
        ConfigError, BundleError, MissingExtraError: bad settings or a bundle that cannot load.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bundle: Optional[str] = None
    encoder: Optional[Any] = None
    settings: Dict[str, Any] = Field(default_factory=dict)
    top_n: Optional[int] = None
    score_threshold: Optional[float] = None
    rationales: Optional[Any] = None
    rationale_generator: Optional[Any] = None
    verifier: Optional[Any] = None
    tokenizer: Optional[str] = None
    detail: str = "summary"
    threads: int = 1
    precision: str = "auto"
    runtime: Optional[Any] = None
    llm_rerank: bool = False
    reject: Optional[Any] = None
    _selector: DocumentSelector = PrivateAttr()
    _last_report: contextvars.ContextVar = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        top_n, threshold = data.get("top_n"), data.get("score_threshold")
        if top_n is not None and (not isinstance(top_n, int) or isinstance(top_n, bool) or top_n < 1):
            raise ConfigError(f"top_n must be an integer >= 1 or None, got {top_n!r}")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or threshold != threshold):
            raise ConfigError(f"score_threshold must be a number or None, got {threshold!r}")
        super().__init__(**data)
        self._selector = DocumentSelector(
            bundle=self.bundle, encoder=self.encoder, settings=self.settings, rationales=self.rationales,
            rationale_generator=self.rationale_generator, verifier=self.verifier, tokenizer=self.tokenizer,
            detail=self.detail, threads=self.threads, precision=self.precision, runtime=self.runtime,
            llm_rerank=self.llm_rerank, reject=self.reject,
        )
        self._last_report = contextvars.ContextVar(f"meteora_edge_report_{id(self)}", default=None)

    @property
    def last_report(self) -> Optional[Dict[str, Any]]:
        """The report of the last call made in this thread or asyncio task (None before the first).

        Prefer the report a call returns (``select``/``aselect``) or its callback event:
        ``last_report`` is only as good as the thread or task you read it from.
        """
        return self._last_report.get()

    def remember(self, kept: Kept) -> None:
        """Make ``kept.report`` this thread's or task's :attr:`last_report`."""
        self._last_report.set(kept.report or None)

    def run_selection(self, query: str, documents: Sequence[Any]) -> Selection:
        """The one call into the selection runtime (thread-safe: the selector's models are read-only)."""
        return self._selector.select(query, documents)

    def keep(self, query: str, documents: Sequence[Any], texts: Sequence[str]) -> Kept:
        """One call: skip the documents whose text is empty, select, cut by ``score_threshold`` and ``top_n``.

        Args:
            query: the question.
            documents: the framework's documents (never modified).
            texts: each document's text, as the framework gives it.

        Returns:
            The :class:`Kept` documents of this call and its report (an empty report when no
            document has text).

        Raises:
            InputError: an empty query. ModelError: a model failed.
        """
        skipped = [i for i, text in enumerate(texts) if not isinstance(text, str) or not text.strip()]
        if skipped:
            logger.warning("meteora-edge skipped %d document(s) without text at position(s) %s",
                           len(skipped), skipped[:20])
        usable = sorted(set(range(len(documents))) - set(skipped))
        selection = self.run_selection(query, [documents[i] for i in usable])
        pairs = [(usable[p], {**r, "id": usable[p]}) for p, r in zip(selection.positions, selection.records)]
        if self.score_threshold is not None:
            pairs = [(p, r) for p, r in pairs if r["score"] >= self.score_threshold]
        if self.top_n is not None:
            pairs = pairs[: self.top_n]
        adapter = {"top_n": self.top_n, "score_threshold": self.score_threshold, "skipped": skipped}
        report = {**selection.report, "passages": [r for _, r in pairs], "adapter": adapter} if documents else {}
        return Kept([p for p, _ in pairs], [r for _, r in pairs], report)
