"""The state of one pipeline run, shared by its phases.

Each phase (:mod:`.phase_candidates`, :mod:`.phase_selection`, :mod:`.phase_verify`,
:mod:`.phase_fallback`, :mod:`.phase_prioritise`, :mod:`.phase_budget`) is a function of a
:class:`RunState` that reads what the phases before it wrote and returns a :class:`Step`:
the summary and details of its trace entry (the engine times the phase and records it).
Candidates are addressed by their *position* in ``texts``; they are only ever appended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..index.corpus_index import CorpusIndex
from ..models.analyzer import Analyzer
from ..models.bm25 import BM25Index
from ..models.encoders import EncoderLike
from ..models.sparse_index import SparseIndex
from ..selection.rationales import RationaleGenerator
from ..selection.token_cover import QueryCover
from ..selection.verification import VerifierLike
from .budget import TokenCounter
from .config import PipelineConfig
from .ladder import CrossEncoder
from .trace import CandidateRecord, Trace

__all__ = ["PipelineParts", "RunState", "Step"]


class PipelineParts(Protocol):
    """What the phases read of the pipeline (an :class:`~.engine.EvidencePipeline`): its settings and models."""

    config: PipelineConfig
    encoder: EncoderLike
    index: CorpusIndex | None
    rationale_generator: RationaleGenerator | None
    verifier: VerifierLike | None
    cross_encoder: CrossEncoder | None
    relevance_scorer: CrossEncoder | None
    token_counter: TokenCounter
    analyzer: Analyzer
    sparse_encoder: object | None
    lexical_scorer: str
    rung: str
    cosine_tau: float
    cross_encoder_tau: float


@dataclass(frozen=True)
class Step:
    """One phase's trace entry: its one-line summary and its details."""

    summary: str
    details: dict[str, Any] = field(default_factory=dict)


class RunState:
    """What one run knows so far: the candidates, their records and vectors, and what each phase kept.

    ``order`` is the selection's positions, best first; ``accepted`` what verification passed;
    ``fallback_added`` the fallback's additions; ``final`` what prioritisation kept; ``priority``
    each position's priority score and its name; ``chosen`` what the budget packed.
    """

    def __init__(self, pipe: PipelineParts, query: str, trace: Trace, reject: tuple[str, ...] = (),
                 check: Callable[[], None] | None = None) -> None:
        self.pipe, self.query, self.trace = pipe, query, trace
        self.cfg: PipelineConfig = pipe.config
        #: the caller's check (see ``EvidencePipeline.run``), also handed to the encoder and the ladder
        self.checker = check
        self.reject = reject
        self.rules: tuple[str, ...] = reject
        self.texts: list[str] = []
        self.docs: list[Any] = []
        self.ids: list[int] = []
        self.labels: list[Any] = []
        self.vectors = np.zeros((0, 1), dtype=np.float32)
        self.query_vector = np.zeros(0, dtype=np.float32)
        self.records: list[CandidateRecord] = []
        self.rationales: list[Any] = []
        self.rationale_vectors: np.ndarray | None = None
        self.order: list[int] = []
        self.accepted: list[int] = []
        self.flagged: set[int] = set()
        self.errored: set[int] = set()
        self.fallback_added: list[int] = []
        self.final: list[int] = []
        self.chosen: list[tuple[int, int, str]] = []  # the budget's (position, tokens, text), in context order
        self.cover: QueryCover | None = None  # the token cover's, when it ran (prioritisation asks it too)
        self.priority: dict[int, tuple[float, str]] = {}
        self._bm25: BM25Index | None = None
        self._sparse: SparseIndex | None = None
        self.long_candidates: bool | None = None  # see rules.long_candidates

    def check(self) -> None:
        """Stop here if the caller's check says so (see ``EvidencePipeline.run``)."""
        if self.checker is not None:
            self.checker()

    def add(self, text: str, doc: Any, chunk_id: int, label: Any, score: float | None) -> int:
        """Append one candidate; returns its position."""
        position = len(self.texts)
        self.texts.append(text)
        self.docs.append(doc)
        self.ids.append(chunk_id)
        self.labels.append(label)
        self.records.append(CandidateRecord(position, label, text, retrieval_score=score))
        return position

    def candidate_bm25(self) -> BM25Index:
        """BM25 over the candidates, built once per run and handed to each phase that scores them
        (the candidates' lexical scores, ECSE, the fallback without an index); built again only
        when the candidates grew (an index run adds chunks retrieved for rationales)."""
        if self._bm25 is None:
            self._bm25 = BM25Index.from_texts(self.texts, analyzer=self.pipe.analyzer)
        elif self._bm25.n_docs != len(self.texts):  # candidates are only ever appended: analyse the new ones
            self._bm25 = self._bm25.extend_texts(self.texts[self._bm25.n_docs:])
        return self._bm25

    def candidate_lexical(self) -> BM25Index | SparseIndex:
        """The candidates' lexical index: their sparse vectors with ``lexical_scorer="sparse"``, else their BM25
        (built once per run, again only when the candidates grew)."""
        if self.pipe.lexical_scorer == "bm25":
            return self.candidate_bm25()
        if self._sparse is None or self._sparse.n_docs != len(self.texts):
            self._sparse = SparseIndex.from_texts(self.texts, encoder=self.pipe.sparse_encoder)
        return self._sparse

    def lexical_index(self) -> BM25Index | SparseIndex | None:
        """The candidates' lexical index for ECSE when its scores have a lexical part, else None."""
        return None if self.cfg.scoring == "dense" else self.candidate_lexical()
