"""An index held in memory, for callers that pass their own chunk store (MeVe's usage).

It implements :class:`~meteora_edge.index.corpus_index.CorpusIndex`, like the on-disk
:class:`~meteora_edge.index.local_index.LocalIndex`, and can limit kNN and BM25 search to
different subsets of its chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..models.analyzer import DEFAULT_ANALYZER, Analyzer
from ..models.bm25 import BM25Index
from ..models.sparse_index import SparseIndex
from ..documents import document_texts
from ..models.encoders import EncoderLike, embed, encoder_id, normalize_rows
from ..errors import InputError
from ..models.vectors import top_k_indices

__all__ = ["InMemoryIndex"]


class InMemoryIndex:
    """Chunks, their vectors and BM25, in memory.

    Args:
        documents: chunks of any accepted document shape (kept as given).
        encoder: embeds the chunks (and, in the pipeline, the queries).
        vectors: precomputed embeddings, one row per document (skips encoding).
        labels: an id per document, reported in records (defaults to positions).
        knn_scope / bm25_scope: positions kNN / BM25 may return (default: all).
        analyzer: turns the chunks and queries into BM25 terms (default: ``english``).
        sparse_encoder: a learned sparse encoder (SPLADE); when given, the chunks' sparse
            vectors are indexed beside BM25 and :attr:`lexical_scorer` is ``"sparse"``.
    """

    def __init__(
        self,
        documents: Sequence[object],
        encoder: EncoderLike,
        *,
        vectors: np.ndarray | None = None,
        labels: Sequence[Any] | None = None,
        knn_scope: Sequence[int] | None = None,
        bm25_scope: Sequence[int] | None = None,
        analyzer: Analyzer = DEFAULT_ANALYZER,
        sparse_encoder: object | None = None,
    ) -> None:
        self.texts = document_texts(documents)
        self.documents = list(documents)
        self.encoder_id = encoder_id(encoder)
        matrix = embed(encoder, self.texts) if vectors is None else np.asarray(vectors)
        if matrix.shape[0] != len(self.texts):
            raise InputError(f"{matrix.shape[0]} vectors for {len(self.texts)} documents")
        self.vectors = normalize_rows(matrix).astype(np.float32)
        self.labels = list(labels) if labels is not None else list(range(len(self.texts)))
        self.analyzer = analyzer
        self.bm25 = BM25Index.from_texts(self.texts, analyzer=analyzer)
        self.sparse = None if sparse_encoder is None else SparseIndex.from_texts(self.texts, encoder=sparse_encoder)
        #: the lexical scorer the index was built with: "sparse" (sparse postings beside BM25) or "bm25"
        self.lexical_scorer = "bm25" if self.sparse is None else "sparse"
        self._knn = None if knn_scope is None else np.unique(np.asarray(knn_scope, dtype=np.int64))
        self._bm25_scope = None if bm25_scope is None else sorted(bm25_scope)

    def __len__(self) -> int:
        return len(self.texts)

    def search(self, query_vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = normalize_rows(np.asarray(query_vector, dtype=np.float32).reshape(1, -1))[0]
        scores = self.vectors @ q
        if self._knn is None:
            best = top_k_indices(scores, k)
        else:  # the scope is sorted, so ties still go to the lower position
            best = self._knn[top_k_indices(scores[self._knn], k)]
        return best, scores[best]

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.bm25.search(query, k, within=self._bm25_scope)

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray:
        """BM25 of ``text`` for each of ``ids`` (over every chunk, whatever the BM25 scope)."""
        return self.bm25.text_scores_for(text, ids)

    def sparse_search(self, query: str, k: int, *, model: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best chunks by the sparse model (within the BM25 scope), best first (the index's own
        model encodes the query; ``model`` is for the protocol's sake)."""
        return self._sparse_index().search(query, k, within=self._bm25_scope)

    def sparse_scores(self, text: str, ids: Sequence[int], *, model: Any = None) -> np.ndarray:
        """The sparse model's score of ``text`` for each of ``ids``."""
        return self._sparse_index().text_scores_for(text, ids)

    def _sparse_index(self) -> SparseIndex:
        if self.sparse is None:
            raise InputError("this index holds no sparse postings; build it with a sparse_encoder")
        return self.sparse

    def vectors_for(self, ids: Sequence[int]) -> np.ndarray:
        return self.vectors[list(ids)]

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        return [{"id": self.labels[i], "text": self.texts[i], "document": self.documents[i]} for i in ids]
