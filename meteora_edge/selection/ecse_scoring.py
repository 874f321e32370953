"""How ECSE scores rationales against chunks: cosine, a lexical score or both fused (the ``scoring``).

The lexical score is BM25's, or with a learned sparse encoder the dot product of sparse vectors.
:class:`ChunkScorer` holds one set of chunks (their vectors, and the lexical index over them,
the caller's or built once on first use) and scores any rationales against them
(:class:`RationaleScores`: per rationale and chunk, BM25 when used and the fused score).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..models.analyzer import Analyzer
from ..models.bm25 import BM25Index
from ..models.encoders import EncoderLike, embed
from ..models.sparse_index import SparseIndex
from .rationales import Rationale
from .stages import cosine_matrix, fuse_scores

__all__ = ["ChunkScorer", "RationaleScores"]


@dataclass(frozen=True)
class RationaleScores:
    """Per rationale (row) and chunk (column): the lexical score (when used) and the fused score."""

    rationale_vectors: np.ndarray
    lexical: np.ndarray | None
    fused: np.ndarray


class ChunkScorer:
    """Scores rationales against one set of chunks.

    Raises:
        InputError: a ``lexical`` index that is not a :class:`BM25Index` or :class:`SparseIndex`, holds
            another number of chunks, or was built with another analyzer or sparse encoder.
    """

    def __init__(
        self,
        texts: list[str],
        chunk_vectors: np.ndarray,
        *,
        encoder: EncoderLike,
        analyzer: Analyzer,
        scoring: str,
        lexical_weight: float,
        sparse_encoder: object | None = None,
        lexical: BM25Index | SparseIndex | None = None,
    ) -> None:
        bm25, sparse = (None, lexical) if isinstance(lexical, SparseIndex) else (lexical, None)
        if sparse is not None:
            if sparse_encoder is None:
                raise InputError("lexical_index is a sparse index but the selector has no sparse_encoder; "
                                 "give it the encoder that built the index")
            if sparse.n_docs != len(texts):
                raise InputError(f"lexical_index holds {sparse.n_docs} documents but there are {len(texts)} chunks; "
                                 "build it over the same chunks")
            if sparse.encoder_identity != getattr(sparse_encoder, "identity", None):
                raise InputError(f"lexical_index was built by the sparse encoder {sparse.encoder_identity!r}, not the "
                                 "selector's; build it with the selector's")
        if bm25 is not None:
            if not isinstance(bm25, BM25Index):
                raise InputError(f"lexical_index must be a BM25Index or None, got {type(bm25).__name__}")
            if bm25.n_docs != len(texts):
                raise InputError(
                    f"lexical_index holds {bm25.n_docs} documents but there are {len(texts)} chunks; "
                    "build it over the same chunks"
                )
            if bm25.analyzer != analyzer:
                raise InputError(
                    f"lexical_index was built with the analyzer {bm25.analyzer.name}:{bm25.analyzer.version} but the "
                    f"selector uses {analyzer.name}:{analyzer.version}; build it with the selector's"
                )
        self.texts = texts
        self.chunk_vectors = chunk_vectors
        self.encoder, self.analyzer = encoder, analyzer
        self.scoring, self.lexical_weight = scoring, lexical_weight
        self.sparse_encoder = sparse_encoder
        self._bm25 = bm25
        self._sparse = sparse

    def lexical_index(self) -> BM25Index:
        """The BM25 index over the chunks (built with the selector's analyzer on first use)."""
        if self._bm25 is None:
            self._bm25 = BM25Index.from_texts(self.texts, analyzer=self.analyzer)
        return self._bm25

    def lexical_scores(self, texts: list[str]) -> np.ndarray:
        """Each text's lexical score for every chunk: sparse dot products with a sparse encoder, else BM25."""
        if self.sparse_encoder is None:
            index = self.lexical_index()
            return np.stack([index.text_scores(t) for t in texts])
        if self._sparse is None:
            self._sparse = SparseIndex.from_texts(self.texts, encoder=self.sparse_encoder)
        return self._sparse.texts_scores(texts)

    def score(self, rationales: list[Rationale]) -> RationaleScores:
        """Each rationale's scores for every chunk.

        Raises:
            InputError: the rationales' vectors have another dimension than the chunks'.
        """
        vectors = embed(self.encoder, [r.text for r in rationales])
        if vectors.shape[1] != self.chunk_vectors.shape[1]:
            raise InputError(
                f"chunk vectors have dimension {self.chunk_vectors.shape[1]} but rationale vectors "
                f"{vectors.shape[1]}; embed both with the same encoder"
            )
        dense = cosine_matrix(vectors, self.chunk_vectors)
        lexical = None
        if self.scoring != "dense":
            lexical = self.lexical_scores([r.text for r in rationales])
        fused = fuse_scores(dense, lexical, scoring=self.scoring, lexical_weight=self.lexical_weight)
        return RationaleScores(vectors, lexical, fused)
