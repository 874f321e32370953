"""Learned-sparse postings: documents' :class:`~.sparse_encoder.SparseVector` by term, scored by dot product.

The counterpart of :class:`~.bm25.BM25Index` for a learned sparse encoder (SPLADE): per vocabulary
term, the documents whose vector holds it and its weight there, as flat numpy arrays
(``terms`` ascending, ``term_ptr`` into ``doc_ids`` / ``weights``). A query's score for a
document is the dot product of their vectors; a query is encoded by the same model that
encoded the documents (:attr:`SparseIndex.encoder_identity` names it). Everything persists as
``.npy`` files; nothing is pickled.

Example:
    >>> docs = [SparseVector(np.array([1, 5], np.int32), np.array([1.0, 2.0], np.float32)),
    ...         SparseVector(np.array([5], np.int32), np.array([0.5], np.float32))]
    >>> SparseIndex(docs).vector_scores(SparseVector(np.array([5], np.int32), np.array([2.0], np.float32))).tolist()
    [4.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError, LocalIndexError
from .vectors import best_positive

__all__ = ["SparseIndex", "SparseVector", "SPARSE_ARRAYS", "sparsify", "sparse_encoder_of"]

#: The stored arrays, in order: terms (int32), term_ptr (int64), doc_ids (int32), weights (float32).
SPARSE_ARRAYS = (
    ("sparse_terms.npy", np.dtype("<i4")),
    ("sparse_term_ptr.npy", np.dtype("<i8")),
    ("sparse_doc_ids.npy", np.dtype("<i4")),
    ("sparse_weights.npy", np.dtype("<f4")),
)
_MEMO = 64  # query vectors remembered (a run scores the question and its rationales more than once)


@dataclass(frozen=True)
class SparseVector:
    """One text's learned-sparse vector: term ids (ascending, int32) and their weights (float32, > 0)."""

    ids: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.size)

    def top(self, n: int) -> list[int]:
        """The ``n`` heaviest term ids, heaviest first."""
        order = np.lexsort((self.ids, -self.weights))[:n]
        return [int(i) for i in self.ids[order]]

    def dot(self, other: SparseVector) -> float:
        """The dot product with another vector (the relevance of a document to a query)."""
        common, mine, theirs = np.intersect1d(self.ids, other.ids, assume_unique=True, return_indices=True)
        return float(np.dot(self.weights[mine].astype(np.float64), other.weights[theirs]))


def sparsify(row: np.ndarray, max_terms: int) -> SparseVector:
    """The ``max_terms`` heaviest positive entries of a dense vocabulary row, ids ascending.

    Example:
        >>> v = sparsify(np.array([0.0, 2.0, 0.5, 0.0, 1.0], dtype=np.float32), 2)
        >>> v.ids.tolist(), v.weights.tolist()
        ([1, 4], [2.0, 1.0])
    """
    nonzero = np.flatnonzero(row > 0)
    if nonzero.size > max_terms:
        values = row[nonzero]
        keep = np.lexsort((nonzero, -values))[:max_terms]
        nonzero = np.sort(nonzero[keep])
    return SparseVector(nonzero.astype(np.int32), row[nonzero].astype(np.float32))



def sparse_model(lexical_scorer: str, encoder: object) -> Any:
    """The learned sparse model an index built with ``lexical_scorer`` needs (None for BM25 alone).

    Raises:
        ConfigError: an unknown scorer, or ``"sparse"`` with an encoder that carries no sparse model.
    """
    if lexical_scorer not in ("bm25", "sparse"):
        raise ConfigError(f"lexical_scorer must be bm25 or sparse, got {lexical_scorer!r}")
    if lexical_scorer == "bm25":
        return None
    model = sparse_encoder_of(encoder)
    if model is None:
        raise ConfigError("lexical_scorer 'sparse' needs a learned sparse model: give a bundle with a sparse_encoder "
                          "component (meteora-edge models install splade-tiny), or use bm25")
    return model


def sparse_encoder_of(*sources: object) -> Any:
    """The first learned-sparse encoder one of ``sources`` carries (``.sparse_encoder``), or None.

    A dense encoder loaded from a bundle that holds a sparse model carries it, so the lexical
    half of the hybrid score can use it wherever the encoder goes.
    """
    for source in sources:
        found = getattr(source, "sparse_encoder", None)
        if found is not None and hasattr(found, "encode_sparse"):
            return found
    return None


class SparseIndex:
    """Documents' learned-sparse vectors as postings.

    Args:
        vectors: one vector per document, in document order.
        encoder: the sparse encoder that made them; queries given as text are encoded by it.
    """

    def __init__(self, vectors: Sequence[SparseVector] = (), *, encoder: Any = None) -> None:
        self.encoder = encoder
        self.encoder_identity = getattr(encoder, "identity", None)
        self._n_docs = len(vectors)
        lengths = np.fromiter((len(v) for v in vectors), dtype=np.int64, count=len(vectors))
        terms = np.concatenate([v.ids for v in vectors]).astype(np.int32) if vectors else np.zeros(0, np.int32)
        weights = np.concatenate([v.weights for v in vectors]).astype(np.float32) if vectors else np.zeros(0, np.float32)
        docs = np.repeat(np.arange(len(vectors), dtype=np.int32), lengths)
        order = np.lexsort((docs, terms))
        self._set(terms[order], docs[order], weights[order])
        self._memo: dict[str, SparseVector] = {}

    def _set(self, sorted_terms: np.ndarray, doc_ids: np.ndarray, weights: np.ndarray) -> None:
        self.terms, starts = np.unique(sorted_terms, return_index=True)
        self.terms = self.terms.astype(np.int32)
        self.term_ptr = np.append(starts, sorted_terms.size).astype(np.int64)
        self.doc_ids, self.weights = doc_ids.astype(np.int32), weights.astype(np.float32)

    @classmethod
    def from_texts(cls, texts: Sequence[str], *, encoder: Any) -> SparseIndex:
        """Encode ``texts`` with ``encoder`` (anything with ``encode_sparse``) and index them."""
        if not hasattr(encoder, "encode_sparse"):
            raise ConfigError(f"a sparse index needs a sparse encoder (with encode_sparse), got {type(encoder).__name__}")
        return cls(encoder.encode_sparse(list(texts)), encoder=encoder)

    @property
    def n_docs(self) -> int:
        return self._n_docs

    @property
    def n_postings(self) -> int:
        return int(self.doc_ids.size)

    def extend(self, vectors: Sequence[SparseVector]) -> SparseIndex:
        """A new index with ``vectors`` appended as documents ``n_docs, n_docs + 1, …``."""
        base_terms = np.repeat(self.terms, np.diff(self.term_ptr))
        new = SparseIndex(vectors)
        new_terms = np.repeat(new.terms, np.diff(new.term_ptr))
        terms = np.concatenate([base_terms, new_terms])
        docs = np.concatenate([self.doc_ids, new.doc_ids + self._n_docs])
        weights = np.concatenate([self.weights, new.weights])
        order = np.lexsort((docs, terms))
        out = SparseIndex(encoder=self.encoder)
        out._n_docs = self._n_docs + len(vectors)
        out._set(terms[order], docs[order], weights[order])
        return out

    def vector_scores(self, query: SparseVector) -> np.ndarray:
        """The dot product of ``query`` with every document, float64 ``(n_docs,)``."""
        out = np.zeros(self._n_docs, dtype=np.float64)
        slots = np.searchsorted(self.terms, query.ids)
        found = (slots < self.terms.size) & (self.terms[np.minimum(slots, max(self.terms.size - 1, 0))] == query.ids) \
            if self.terms.size else np.zeros(query.ids.size, dtype=bool)
        for slot, weight in zip(slots[found], query.weights[found]):
            start, end = self.term_ptr[slot], self.term_ptr[slot + 1]
            out[self.doc_ids[start:end]] += float(weight) * self.weights[start:end]
        return out

    def query_vectors(self, texts: Sequence[str]) -> list[SparseVector]:
        """The texts' vectors by this index's encoder (the last few remembered)."""
        if self.encoder is None:
            raise InputError("this sparse index has no encoder to encode a query; open it with the bundle that built it")
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            if len(self._memo) + len(missing) > _MEMO:
                self._memo.clear()
            self._memo.update(zip(missing, self.encoder.encode_sparse(missing)))
        return [self._memo[t] for t in texts]

    def text_scores(self, text: str) -> np.ndarray:
        """The score of ``text`` (encoded by this index's encoder) for every document."""
        return self.vector_scores(self.query_vectors([text])[0])

    def texts_scores(self, texts: Sequence[str]) -> np.ndarray:
        """One row of scores per text, ``(len(texts), n_docs)`` (the texts encoded in one call)."""
        vectors = self.query_vectors(list(texts))
        return np.stack([self.vector_scores(v) for v in vectors]) if vectors else np.zeros((0, self._n_docs))

    def text_scores_for(self, text: str, docs: Sequence[int]) -> np.ndarray:
        """The score of ``text`` for each of ``docs``, in the order given."""
        return self.text_scores(text)[np.asarray(list(docs), dtype=np.int64)]

    def search(self, query: str, k: int, *, within: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best documents with a positive score, best first: ``(doc_ids, scores)``."""
        return best_positive(self.text_scores(query), k, within)

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored arrays by file name (see :data:`SPARSE_ARRAYS`)."""
        values = (self.terms, self.term_ptr, self.doc_ids, self.weights)
        return {name: np.ascontiguousarray(a, dtype=dtype) for (name, dtype), a in zip(SPARSE_ARRAYS, values)}

    def save(self, directory: str | Path) -> list[str]:
        """Write the arrays into ``directory``; return the file names."""
        names = []
        for name, array in self.arrays().items():
            np.save(Path(directory) / name, array, allow_pickle=False)
            names.append(name)
        return names

    def subset(self, keep: np.ndarray) -> SparseIndex:
        """A new index of the documents ``keep`` (ascending ids), renumbered ``0, 1, …`` in that order."""
        keep = np.asarray(keep, dtype=np.int64)
        new_id = np.full(self._n_docs, -1, dtype=np.int64)
        new_id[keep] = np.arange(keep.size)
        terms = np.repeat(self.terms, np.diff(self.term_ptr))
        mapped = new_id[np.asarray(self.doc_ids, dtype=np.int64)]
        alive = mapped >= 0
        out = SparseIndex(encoder=self.encoder)
        out.encoder_identity = self.encoder_identity
        out._n_docs = int(keep.size)
        out._set(terms[alive], mapped[alive].astype(np.int32), np.asarray(self.weights)[alive])  # still term-sorted
        return out

    @classmethod
    def load(cls, directory: str | Path, *, n_docs: int, encoder: Any = None) -> SparseIndex:
        """Read the arrays :meth:`save` wrote (memory-mapped) and check they describe ``n_docs`` documents.

        Raises:
            LocalIndexError: a file is missing, unreadable or inconsistent.
        """
        loaded = []
        for name, dtype in SPARSE_ARRAYS:
            path = Path(directory) / name
            try:
                array = np.load(path, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise LocalIndexError(f"cannot read {path}: {exc}; rebuild the index") from None
            if array.dtype != dtype or array.ndim != 1:
                raise LocalIndexError(f"{path} holds {array.dtype} of {array.ndim} dimensions, expected {dtype} "
                                      "of one; rebuild the index")
            loaded.append(array)
        return cls.from_arrays(*loaded, n_docs=n_docs, where=str(directory), encoder=encoder)

    @classmethod
    def from_arrays(cls, terms: np.ndarray, term_ptr: np.ndarray, doc_ids: np.ndarray, weights: np.ndarray, *,
                    n_docs: int, where: str, encoder: Any = None) -> SparseIndex:
        """An index over stored arrays (see :data:`SPARSE_ARRAYS`), after checking they fit together.

        Raises:
            LocalIndexError: the arrays are inconsistent.
        """
        problem = None
        if term_ptr.size != terms.size + 1 or term_ptr[0] != 0 or term_ptr[-1] != doc_ids.size:
            problem = "term pointers do not match the postings"
        elif bool((np.diff(term_ptr) <= 0).any()):
            problem = "a term without postings"
        elif doc_ids.size != weights.size:
            problem = "documents and weights differ in length"
        elif doc_ids.size and (int(doc_ids.min()) < 0 or int(doc_ids.max()) >= n_docs):
            problem = f"a posting names a document outside 0..{n_docs - 1}"
        elif terms.size > 1 and bool((np.diff(terms) <= 0).any()):
            problem = "terms are not ascending"
        elif weights.size and not bool(np.isfinite(weights).all()):
            problem = "a weight is not finite"
        if problem:
            raise LocalIndexError(f"the sparse postings in {where} are damaged ({problem}); rebuild the index")
        index = cls(encoder=encoder)
        index._n_docs = n_docs
        index.terms, index.term_ptr, index.doc_ids, index.weights = terms, term_ptr, doc_ids, weights
        return index
