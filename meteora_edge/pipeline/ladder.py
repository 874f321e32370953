"""The verification ladder: LLM verifier → cross-encoder score ≥ tau → cosine ≥ tau → none.

``"auto"`` takes the highest rung available (none instead of cosine after the LLM rerank,
whose model has judged the candidates already). Every rung returns, per judged chunk, whether
it passed and the score it was judged by; the LLM rung also returns the verdicts. The cosine
rung judges a chunk by its best cosine to the query *or any rationale* (METEORA's verifier
asks whether a chunk is relevant given the rationales; a second-hop rationale points at
evidence the question alone does not resemble).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError, ModelError
from ..selection.rationales import Rationale
from ..selection.stages import cosine_matrix
from ..selection.verification import Verdict, VerifierLike, verify_chunks, verify_chunks_batched

__all__ = ["CrossEncoder", "LadderOutcome", "choose_rung", "run_ladder", "RUNGS"]

Rung = Literal["llm", "cross-encoder", "cosine", "none"]
RUNGS = ("auto", "llm", "cross-encoder", "cosine", "none")


@runtime_checkable
class CrossEncoder(Protocol):
    """Scores (query, passage) pairs; higher is more relevant (e.g. a probability)."""

    def score(self, query: str, passages: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class LadderOutcome:
    rung: Rung
    passed: list[bool]
    scores: list[float | None]
    verdicts: list[Verdict] = field(default_factory=list)


def choose_rung(requested: str, *, verifier: object | None, cross_encoder: object | None, reranked: bool = False) -> Rung:
    """Resolve ``"auto"`` and check the requested rung is available.

    ``"auto"`` is the LLM verifier when there is one, else the cross-encoder, else — when the
    LLM rerank has already judged the candidates (``reranked``) — none, else the cosine rung.
    """
    if requested not in RUNGS:
        raise ConfigError(f"verification must be one of {', '.join(RUNGS)}, got {requested!r}")
    if requested == "auto":
        if verifier is not None:
            return "llm"
        if cross_encoder is not None:
            return "cross-encoder"
        return "none" if reranked else "cosine"
    if requested == "llm" and verifier is None:
        raise ConfigError("verification 'llm' needs a verifier; add an llm to the bundle or pass verifier=…")
    if requested == "cross-encoder" and cross_encoder is None:
        raise ConfigError("verification 'cross-encoder' needs a cross-encoder; export one into the bundle")
    return requested  # type: ignore[return-value]


def run_ladder(
    rung: Rung,
    *,
    query: str,
    texts: Sequence[str],
    order: Sequence[int],
    rationales: Sequence[Rationale],
    tau: float,
    query_vector: np.ndarray,
    vectors: np.ndarray,
    verifier: VerifierLike | None = None,
    cross_encoder: CrossEncoder | None = None,
    rationale_vectors: np.ndarray | None = None,
    batch_size: int = 1,
    check: Callable[[], None] | None = None,
) -> LadderOutcome:
    """Judge ``texts[i]`` for ``i`` in ``order`` on one rung; results follow ``order``.

    ``rationale_vectors`` (one row per rationale) join the query for the cosine rung. A
    verifier with ``verify_batch`` judges ``batch_size`` chunks per call on the LLM rung;
    any other verifier judges one chunk at a time; ``check`` is called before each LLM call.
    """
    if not order:
        return LadderOutcome(rung, [], [])
    if rung == "llm":
        assert verifier is not None
        if hasattr(verifier, "verify_batch") and batch_size > 1:
            verdicts = verify_chunks_batched(verifier, query, texts, order, rationales, batch_size=batch_size,  # type: ignore[arg-type]
                                             check=check)
        else:
            verdicts = verify_chunks(verifier, query, texts, order, rationales, check=check)
        return LadderOutcome(rung, [v.accepted for v in verdicts], [None] * len(order), verdicts)
    if rung == "cross-encoder":
        assert cross_encoder is not None
        raw = np.asarray(cross_encoder.score(query, [texts[i] for i in order]), dtype=np.float64).ravel()
        if raw.shape[0] != len(order) or not np.isfinite(raw).all():
            raise ModelError(f"cross-encoder returned {raw.shape[0]} scores for {len(order)} passages, or non-finite values")
        return LadderOutcome(rung, [bool(s >= tau) for s in raw], [float(s) for s in raw])
    if rung == "cosine":
        references = [np.ravel(query_vector)]  # cosine_matrix works in float64 whatever the dtype
        if rationale_vectors is not None and len(rationale_vectors):
            references.append(rationale_vectors)
        sims = cosine_matrix(np.vstack(references), np.asarray(vectors)[list(order)]).max(axis=0)
        return LadderOutcome(rung, [bool(s >= tau) for s in sims], [float(s) for s in sims])
    return LadderOutcome("none", [True] * len(order), [None] * len(order))
