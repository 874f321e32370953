"""Retrieval over an index: kNN (and BM25 unless scoring is dense), ranked by the fused score.

The pipeline's first phase (:mod:`.engine`) and ``meteora-edge index search`` both call
:func:`index_candidates`, so a search shows exactly the candidates, scores and order a
``select --index`` run with the default ``k_init`` starts from. A search scores its hits over
that same pool of :data:`SEARCH_POOL` candidates whatever ``k`` is: the hybrid score standardises
cosine and BM25 over the pool, so a chunk's score and the order of the hits do not change with ``k``.

Example:
    >>> from meteora_edge import HashingEncoder
    >>> from meteora_edge.index.memory_index import InMemoryIndex
    >>> enc = HashingEncoder()
    >>> index = InMemoryIndex(["fees are due monthly", "either party may terminate"], enc)
    >>> [h.text for h in search(index, enc, "who may terminate", k=1)]
    ['either party may terminate']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..index.corpus_index import CorpusIndex
from ..models.encoders import EncoderLike, embed
from ..models.sparse_index import sparse_encoder_of
from ..selection.stages import SCORINGS, fuse_scores

__all__ = ["Hit", "SEARCH_POOL", "cosines", "index_candidates", "fused", "search", "lexical_search",
           "resolve_lexical_scorer", "AUTO_FOR_PASSAGES"]

#: The candidates a search scores its hits over (the pipeline's default ``k_init``).
SEARCH_POOL = 50

#: What ``lexical_scorer="auto"`` is for given passages, the sparse model at hand or not. Chosen on the
#: two dev sets (docs/sparse.md): fused with MiniLM, the sparse model did not beat BM25 on both.
AUTO_FOR_PASSAGES = "bm25"


def resolve_lexical_scorer(setting: str, *, sparse_encoder: object | None, index: object | None = None) -> str:
    """What the lexical half of the hybrid score is for a run: ``"bm25"`` or ``"sparse"``.

    ``"auto"`` follows the index (the lexical scorer it recorded at build time: a query is scored
    as its index was), and for given passages is :data:`AUTO_FOR_PASSAGES`. An explicit
    ``"sparse"`` needs the sparse model, and over an index the index's sparse postings; BM25 is
    always possible (every index keeps BM25 postings, and given passages need no model).

    Raises:
        ConfigError: ``"sparse"`` without a sparse model, or over an index without sparse postings.
    """
    recorded = getattr(index, "lexical_scorer", "bm25") if index is not None else None
    if setting == "auto":
        setting = recorded if recorded is not None else AUTO_FOR_PASSAGES
        if setting == "sparse" and sparse_encoder is None:
            raise ConfigError("the index was built with the learned sparse model (lexical scorer 'sparse'): give the "
                              "bundle that holds it, or score with bm25 (lexical_scorer bm25)")
    if setting == "sparse":
        if sparse_encoder is None:
            raise ConfigError("lexical_scorer 'sparse' needs a learned sparse model: give a bundle with a "
                              "sparse_encoder component (meteora-edge models install splade-tiny), or use bm25")
        if recorded is not None and recorded != "sparse":
            raise ConfigError("lexical_scorer 'sparse' over an index built without sparse postings: a query is scored "
                              "as its index was; rebuild the index with --lexical-scorer sparse, or use bm25")
    return setting


def lexical_search(index: CorpusIndex, text: str, k: int, lexical_scorer: str,
                   sparse_encoder: object | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The index's ``k`` best chunks for ``text`` by its lexical scorer: BM25, or the sparse postings
    (the query encoded by ``sparse_encoder``, which must be the model that built them)."""
    if lexical_scorer == "sparse":
        return index.sparse_search(text, k, model=sparse_encoder)  # type: ignore[attr-defined]
    return index.bm25_search(text, k)


def _lexical_scores(index: CorpusIndex, text: str, ids: list[int], lexical_scorer: str,
                    sparse_encoder: object | None) -> np.ndarray:
    if lexical_scorer == "sparse":
        return np.asarray(index.sparse_scores(text, ids, model=sparse_encoder), dtype=np.float64)  # type: ignore[attr-defined]
    return np.asarray(index.lexical_scores(text, ids), dtype=np.float64)


def cosines(vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """The cosine of each row of ``vectors`` with ``query_vector`` (0 for a zero row), float64."""
    if len(vectors) == 0:
        return np.zeros(0)
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    return rows @ (query_vector / (np.linalg.norm(query_vector) or 1.0)) / norms


def fused(dense: np.ndarray, lexical: np.ndarray | None, *, scoring: str, lexical_weight: float = 1.0) -> np.ndarray:
    """The retrieval score of each candidate (the cosine alone when there is no lexical part)."""
    if lexical is None or len(dense) == 0:  # dense scoring has no lexical part
        return np.asarray(dense, dtype=np.float64)
    return fuse_scores(np.asarray(dense)[None, :], np.asarray(lexical)[None, :], scoring=scoring,
                       lexical_weight=lexical_weight)[0]


def index_candidates(
    index: CorpusIndex, query: str, query_vector: np.ndarray, k: int, *, scoring: str, lexical_weight: float = 1.0,
    lexical_scorer: str = "bm25", sparse_encoder: object | None = None,
) -> tuple[list[int], np.ndarray, np.ndarray | None]:
    """kNN's ``k`` best (and the lexical scorer's ``k`` best unless scoring is dense), ranked by the fused score.

    ``lexical_scorer`` is ``"bm25"`` or ``"sparse"`` (the index's sparse postings; see
    :func:`resolve_lexical_scorer`).

    Returns:
        ``(ids, cosines, BM25 scores or None)``, best first: at most ``k`` ids, or as many
        as kNN found when that is more.
    """
    knn_ids, knn_scores = index.search(query_vector, k)
    dense_of = {int(c): float(s) for c, s in zip(knn_ids, knn_scores)}
    if scoring == "dense":
        ids = list(dense_of)
        return ids, np.asarray([dense_of[c] for c in ids]), None
    lexical_ids, _ = lexical_search(index, query, k, lexical_scorer, sparse_encoder)
    ids = list(dict.fromkeys([*dense_of, *(int(c) for c in lexical_ids)]))
    if not ids:
        return [], np.zeros(0), np.zeros(0)
    lexical = _lexical_scores(index, query, ids, lexical_scorer, sparse_encoder)
    missing = [c for c in ids if c not in dense_of]
    if missing:
        extra = cosines(np.asarray(index.vectors_for(missing), dtype=np.float32), query_vector)
        dense_of.update({c: float(s) for c, s in zip(missing, extra)})
    dense = np.asarray([dense_of[c] for c in ids])
    scores = fused(dense, lexical, scoring=scoring, lexical_weight=lexical_weight)
    ranked = np.lexsort((np.arange(len(ids)), -scores))[: max(k, len(knn_ids))]
    return [ids[i] for i in ranked], dense[ranked], lexical[ranked]


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk: its id, text, record (source, offsets, metadata) and scores."""

    id: int
    text: str
    score: float
    dense: float
    lexical: float | None
    record: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        extra = {k: v for k, v in self.record.items() if k not in ("id", "text", "sha256")}
        return {"id": self.id, "score": self.score, "dense_score": self.dense, "lexical_score": self.lexical,
                "text": self.text, **extra}


def search(
    index: CorpusIndex, encoder: EncoderLike, query: str, *, k: int = 10, scoring: str = "hybrid",
    lexical_weight: float = 1.0,
) -> list[Hit]:
    """The ``k`` best chunks of ``index`` for ``query``, with no selection: retrieval only.

    Args:
        index: the index (its encoder must be ``encoder``'s; the caller checks).
        encoder: embeds the query.
        query: the question.
        k: how many chunks.
        scoring: ``hybrid`` (standardised cosine + BM25), ``dense`` (cosine) or ``lexical`` (BM25).
            The lexical scorer is the index's own (its sparse postings when it was built with them).
        lexical_weight: the lexical score's weight in the hybrid score.

    Raises:
        ConfigError: an empty query, k < 1 or an unknown scoring.
    """
    if not isinstance(query, str) or not query.strip():
        raise ConfigError("query must be a non-empty string")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if scoring not in SCORINGS:
        raise ConfigError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    query_vector = np.asarray(embed(encoder, [query])[0], dtype=np.float32)
    sparse_encoder = sparse_encoder_of(encoder)
    lexical_scorer = resolve_lexical_scorer("auto", sparse_encoder=sparse_encoder, index=index)
    ids, dense, lexical = index_candidates(index, query, query_vector, SEARCH_POOL, scoring=scoring,
                                           lexical_weight=lexical_weight, lexical_scorer=lexical_scorer,
                                           sparse_encoder=sparse_encoder)
    reference = (dense, lexical)
    if k > len(ids) and len(ids) >= SEARCH_POOL:  # more than the pool: the wider set, scored on the pool's scale
        ids, dense, lexical = index_candidates(index, query, query_vector, k, scoring=scoring,
                                               lexical_weight=lexical_weight, lexical_scorer=lexical_scorer,
                                               sparse_encoder=sparse_encoder)
    scores = _scaled(dense, lexical, reference, scoring=scoring, lexical_weight=lexical_weight)
    order = np.lexsort((np.arange(len(ids)), -scores))[:k]
    records = index.records([ids[i] for i in order])
    return [Hit(id=int(ids[i]), text=str(record["text"]), score=float(scores[i]), dense=float(dense[i]),
                lexical=None if lexical is None else float(lexical[i]), record=dict(record))
            for i, record in zip(order, records)]


def _scaled(dense: np.ndarray, lexical: np.ndarray | None, reference: tuple[np.ndarray, np.ndarray | None], *,
            scoring: str, lexical_weight: float) -> np.ndarray:
    """:func:`fused` scores of ``dense``/``lexical``, each part standardised by the mean and spread of
    ``reference`` (the search pool's own scores), so the wider set of a large ``k`` keeps the pool's scale."""
    if lexical is None or len(dense) == 0:
        return np.asarray(dense, dtype=np.float64)

    def z(values: np.ndarray, like: np.ndarray) -> np.ndarray:
        like = np.asarray(like, dtype=np.float64)
        spread = float(like.std()) if np.ptp(like) > 0 else 0.0
        return (np.asarray(values, dtype=np.float64) - like.mean()) / spread if spread else np.zeros(len(values))

    lexical_z = z(lexical, reference[1])  # type: ignore[arg-type]
    return lexical_z if scoring == "lexical" else z(dense, reference[0]) + lexical_weight * lexical_z
