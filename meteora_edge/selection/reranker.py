"""The METEORA reranker facade: rationales → ECSE → optional verifier → ordered documents.

Rationale resolution (given → generated → the query) lives in
:mod:`~meteora_edge.selection.rationales`; ``RationaleGenerator`` and ``resolve_rationales``
are re-exported here for callers that import them from the facade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..documents import document_texts
from .ecse import MeteoraSelector, SelectionResult
from ..models.encoders import EncoderLike, embed
from ..errors import ConfigError, InputError
from .rationales import Rationale, RationaleGenerator, resolve_rationales
from .verification import Verdict, VerifierLike, verify_chunks

__all__ = ["MeteoraReranker", "RerankTrace", "RankedDocument", "RationaleGenerator", "resolve_rationales", "document_metadata"]

Order = Literal["score", "document"]


@dataclass(frozen=True)
class RankedDocument:
    """One kept document, as a reranker result: METEORA's ``index``, ``text``, ``score``, ``rank``.

    ``document`` is the caller's own object; ``metadata`` its metadata (a mapping's
    ``metadata`` or other non-text keys, or an object's ``.metadata``); ``verdict`` the
    verifier's decision when one ran.
    """

    document: Any
    index: int
    score: float
    rank: int = 0
    text: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None

    @property
    def accepted(self) -> bool:
        return self.verdict.accepted if self.verdict is not None else True

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "index": self.index,
            "score": round(self.score, 6),
            "text": self.text,
            "metadata": dict(self.metadata),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
        }


@dataclass(frozen=True)
class RerankTrace:
    """The result of :meth:`MeteoraReranker.trace`: kept documents and the reasons."""

    query: str
    documents: list[Any]
    indices: list[int]
    scores: list[float]
    rationales: list[Rationale]
    rationale_source: str
    selection: SelectionResult
    verdicts: list[Verdict] = field(default_factory=list)
    verified: bool = False
    order: str = "score"
    top_k: int | None = None
    texts: list[str] = field(default_factory=list, repr=False)

    @property
    def results(self) -> list[RankedDocument]:
        """The kept documents as ranked results (rank 1 first, in the trace's order)."""
        verdicts = {v.chunk_index: v for v in self.verdicts}
        return [
            RankedDocument(document, index, score, rank, text, document_metadata(document), verdicts.get(index))
            for rank, (document, index, score, text) in enumerate(
                zip(self.documents, self.indices, self.scores, self.texts or [""] * len(self.indices)), start=1
            )
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "indices": list(self.indices),
            "scores": [round(s, 6) for s in self.scores],
            "rationale_source": self.rationale_source,
            "rationales": [r.to_dict() for r in self.rationales],
            "selection": self.selection.to_dict(),
            "verified": self.verified,
            "verdicts": [v.to_dict() for v in self.verdicts],
            "order": self.order,
            "top_k": self.top_k,
            "results": [r.to_dict() for r in self.results],
        }


def document_metadata(document: object) -> dict[str, Any]:
    """The caller's metadata of a document: a mapping's ``metadata`` plus its other non-text
    keys, or an object's ``.metadata`` mapping (LangChain-like); ``{}`` for a string."""
    if isinstance(document, Mapping):
        meta = dict(document["metadata"]) if isinstance(document.get("metadata"), Mapping) else {}
        extra = {str(k): v for k, v in document.items() if k not in ("text", "content", "page_content", "metadata")}
        return {**extra, **meta}
    meta = getattr(document, "metadata", None)
    return dict(meta) if isinstance(meta, Mapping) else {}


class MeteoraReranker:
    """Rank-free evidence selection for a query over candidate documents.

    Args:
        encoder: any encoder (``.encode(list[str])`` or a callable).
        rationale_generator: callable ``query -> text | list`` or ``(query, documents) -> …``, or an
            object with ``.generate``/``.complete``/``.invoke``; used when no rationales are passed.
        verifier: a verifier or text model (see :mod:`meteora_edge.selection.verification`);
            wrap a model in :class:`MeteoraVerifier` for ``fail_closed=False``.
        fallback_to_query_rationale: use the query as the only rationale when none are available.
        expansion_window: neighbours added around selected positions (0: documents are
            independent retrieval results).
        elbow_z_threshold: z-score threshold of the pooled elbow.
        order: ``"score"`` (best first) or ``"document"`` (input order; METEORA's ``"input"`` and
            ``"context"`` mean the same).
        top_k: optional cap on the number of documents returned, applied last.

    Example:
        >>> from meteora_edge import HashingEncoder, MeteoraReranker
        >>> rr = MeteoraReranker(HashingEncoder())
        >>> docs = [{"text": "Rent is due monthly."}, {"text": "Tenant may terminate with notice."}]
        >>> kept = rr.filter("when may the tenant terminate", docs)   # the caller's objects, best first
        >>> kept[0] is docs[1]
        True
    """

    def __init__(
        self,
        encoder: EncoderLike,
        *,
        rationale_generator: RationaleGenerator | None = None,
        verifier: VerifierLike | None = None,
        fallback_to_query_rationale: bool = True,
        expansion_window: int = 0,
        elbow_z_threshold: float = 1.0,
        order: Order = "score",
        top_k: int | None = None,
    ) -> None:
        self.selector = MeteoraSelector(
            encoder, expansion_window=expansion_window, elbow_z_threshold=elbow_z_threshold
        )
        self.encoder = encoder
        self.rationale_generator = rationale_generator
        self.verifier = verifier
        self.fallback_to_query_rationale = fallback_to_query_rationale
        self.order = _check_order(order)
        self.top_k = _check_top_k(top_k)

    def trace(
        self,
        query: str,
        documents: Sequence[object],
        *,
        rationales: object | None = None,
        top_k: int | None = None,
        verify: bool | None = None,
        order: Order | None = None,
    ) -> RerankTrace:
        """Select, verify and order ``documents`` for ``query``, recording every step.

        Args:
            query: the question.
            documents: candidates of any accepted shape; never modified.
            rationales: overrides the generator (text or list).
            top_k: cap on the result (defaults to the reranker's).
            verify: ``None`` verifies when a verifier is set; ``True`` requires one.
            order: overrides the reranker's order.

        Returns:
            A :class:`RerankTrace` whose ``documents`` are the caller's objects.

        Raises:
            InputError: bad documents, no rationale, or ``verify=True`` without a verifier.
        """
        if not isinstance(query, str):
            raise InputError(f"query must be a string, got {type(query).__name__}")
        order = _check_order(order or self.order)
        top_k = _check_top_k(top_k if top_k is not None else self.top_k)
        texts = document_texts(documents)
        if not texts:
            raise InputError("no documents to rerank; give at least one")
        if verify and self.verifier is None:
            raise InputError("verify=True but the reranker has no verifier; pass verifier=…")
        do_verify = self.verifier is not None if verify is None else bool(verify)

        chosen, source = resolve_rationales(
            query, rationales, self.rationale_generator, fallback_to_query=self.fallback_to_query_rationale,
            documents=texts,
        )
        selection = self.selector.select(documents, chosen, chunk_vectors=embed(self.encoder, texts))
        scores = selection.scores()
        kept = sorted(selection.selected_indices, key=lambda i: (-scores[i], i))
        verdicts: list[Verdict] = []
        if do_verify:
            assert self.verifier is not None
            verdicts = verify_chunks(self.verifier, query, texts, kept, chosen)
            kept = [v.chunk_index for v in verdicts if v.accepted]
        if order == "document":
            kept = sorted(kept)
        if top_k is not None:
            kept = kept[:top_k] if order == "score" else sorted(sorted(kept, key=lambda i: (-scores[i], i))[:top_k])
        return RerankTrace(
            query=query,
            documents=[documents[i] for i in kept],
            indices=kept,
            scores=[float(scores[i]) for i in kept],
            rationales=chosen,
            rationale_source=source,
            selection=selection,
            verdicts=verdicts,
            verified=do_verify,
            order=order,
            top_k=top_k,
            texts=[texts[i] for i in kept],
        )

    def rerank(
        self,
        query: str,
        documents: Sequence[object],
        *,
        rationales: object | None = None,
        top_k: int | None = None,
        verify: bool | None = None,
        order: Order | None = None,
    ) -> list[RankedDocument]:
        """Like :meth:`trace`, returning :class:`RankedDocument` results (rank, index, text, score, …)."""
        return self.trace(query, documents, rationales=rationales, top_k=top_k, verify=verify, order=order).results

    def filter(
        self,
        query: str,
        documents: Sequence[object],
        *,
        rationales: object | None = None,
        top_k: int | None = None,
        verify: bool | None = None,
        order: Order | None = None,
    ) -> list[Any]:
        """Like :meth:`trace`, returning only the caller's original document objects."""
        return self.trace(query, documents, rationales=rationales, top_k=top_k, verify=verify, order=order).documents


def _check_order(order: object) -> Order:
    if order in ("input", "context"):  # METEORA's other names for document order
        return "document"
    if order not in ("score", "document"):
        raise ConfigError(f"order must be 'score' or 'document' (or 'input'/'context'), got {order!r}")
    return order  # type: ignore[return-value]


def _check_top_k(top_k: object) -> int | None:
    if top_k is None:
        return None
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ConfigError(f"top_k must be a positive integer or None, got {top_k!r}")
    return top_k

