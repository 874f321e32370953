"""BM25 (Okapi) with scores computed at index time, stored as flat numpy arrays.

The index keeps, per term, the documents that contain it and the finished BM25 weight of
the term in each (``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``), so a
query is a sum of a few array slices plus a top-k. Scores equal ``rank_bm25.BM25Okapi``'s
for the same tokens (including its epsilon floor for negative idf); the test suite checks
that parity. Everything persists as ``.npy`` files (memory-mapped on load) and a JSON
vocabulary; nothing is pickled.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError, LocalIndexError
from .vectors import top_k_indices

__all__ = ["BM25Index", "bm25_tokens"]

_WORD = re.compile(r"\w+", re.UNICODE)
_FILES = ("bm25_term_ptr.npy", "bm25_doc_ids.npy", "bm25_tf.npy", "bm25_doc_len.npy", "bm25_vocab.json")


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased unicode word runs: the tokenisation every BM25 index here uses."""
    return _WORD.findall(text.lower())


class BM25Index:
    """An immutable BM25 index; :meth:`extend` returns a new one.

    Args:
        vocab: term → term id.
        term_ptr: ``len(vocab) + 1`` offsets into ``doc_ids``/``tf`` (postings grouped by term).
        doc_ids: document of each posting.
        tf: term frequency of each posting.
        doc_len: token count of each document.
        k1, b, epsilon: the Okapi parameters (rank-bm25's defaults).
    """

    def __init__(
        self,
        vocab: dict[str, int],
        term_ptr: np.ndarray,
        doc_ids: np.ndarray,
        tf: np.ndarray,
        doc_len: np.ndarray,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ) -> None:
        if not (k1 >= 0 and 0 <= b <= 1 and epsilon >= 0):
            raise ConfigError(f"BM25 needs k1 >= 0, 0 <= b <= 1, epsilon >= 0; got k1={k1}, b={b}, epsilon={epsilon}")
        self.vocab = vocab
        self.term_ptr = term_ptr
        self.doc_ids = doc_ids
        self.tf = tf
        self.doc_len = doc_len
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.weights = self._weights()

    @property
    def n_docs(self) -> int:
        return int(self.doc_len.shape[0])

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], **params: float) -> BM25Index:
        """Index documents given as token lists (see :func:`bm25_tokens`)."""
        return cls.empty(**params).extend(token_lists)

    @classmethod
    def empty(cls, **params: float) -> BM25Index:
        zero = np.zeros(0, dtype=np.int32)
        return cls({}, np.zeros(1, dtype=np.int64), zero, zero, zero, **params)

    def extend(self, token_lists: Iterable[Sequence[str]]) -> BM25Index:
        """A new index holding this one's documents followed by ``token_lists``."""
        vocab = dict(self.vocab)
        terms: list[int] = []
        docs: list[int] = []
        freqs: list[int] = []
        lengths: list[int] = []
        for doc, tokens in enumerate(token_lists, start=self.n_docs):
            lengths.append(len(tokens))
            for term, count in Counter(tokens).items():
                terms.append(vocab.setdefault(term, len(vocab)))
                docs.append(doc)
                freqs.append(count)
        old_terms = np.repeat(np.arange(len(self.vocab), dtype=np.int64), np.diff(self.term_ptr))
        all_terms = np.concatenate([old_terms, np.asarray(terms, dtype=np.int64)])
        all_docs = np.concatenate([self.doc_ids, np.asarray(docs, dtype=np.int32)])
        all_tf = np.concatenate([self.tf, np.asarray(freqs, dtype=np.int32)])
        order = np.lexsort((all_docs, all_terms))
        counts = np.bincount(all_terms, minlength=len(vocab))
        term_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return BM25Index(
            vocab,
            term_ptr,
            all_docs[order].astype(np.int32),
            all_tf[order].astype(np.int32),
            np.concatenate([self.doc_len, np.asarray(lengths, dtype=np.int32)]),
            k1=self.k1,
            b=self.b,
            epsilon=self.epsilon,
        )

    def _weights(self) -> np.ndarray:
        n = self.n_docs
        if n == 0 or self.doc_ids.size == 0:
            return np.zeros(self.doc_ids.shape[0], dtype=np.float32)
        df = np.diff(self.term_ptr).astype(np.float64)
        idf = np.log(n - df + 0.5) - np.log(df + 0.5)
        idf[idf < 0] = self.epsilon * idf.sum() / idf.size
        avgdl = self.doc_len.sum() / n
        tf = self.tf.astype(np.float64)
        norm = self.k1 * (1 - self.b + self.b * self.doc_len[self.doc_ids] / avgdl)
        term_of_posting = np.repeat(idf, np.diff(self.term_ptr))
        return (term_of_posting * tf * (self.k1 + 1) / (tf + norm)).astype(np.float32)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for the query tokens (repeats count again)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in query_tokens:
            term_id = self.vocab.get(term)
            if term_id is None:
                continue
            lo, hi = self.term_ptr[term_id], self.term_ptr[term_id + 1]
            out[self.doc_ids[lo:hi]] += self.weights[lo:hi]  # a term's postings name each document once
        return out

    def search(self, query: str, k: int, *, within: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best documents with a positive score, best first.

        Args:
            query: the query text (tokenised with :func:`bm25_tokens`).
            k: how many to return at most.
            within: restrict to these document ids.

        Returns:
            ``(doc_ids, scores)``.
        """
        scores = self.scores(bm25_tokens(query))
        if within is not None:
            mask = np.full(scores.shape, -np.inf)
            ids = np.asarray(within, dtype=np.int64)
            mask[ids] = scores[ids]
            scores = mask
        best = top_k_indices(scores, k)
        best = best[scores[best] > 0]
        return best, scores[best]

    def save(self, directory: str | Path) -> list[str]:
        """Write the index files into ``directory``; return their names."""
        root = Path(directory)
        np.save(root / _FILES[0], self.term_ptr)
        np.save(root / _FILES[1], self.doc_ids)
        np.save(root / _FILES[2], self.tf)
        np.save(root / _FILES[3], self.doc_len)
        params = {"k1": self.k1, "b": self.b, "epsilon": self.epsilon}
        (root / _FILES[4]).write_text(json.dumps({"params": params, "terms": list(self.vocab)}), encoding="utf-8")
        return list(_FILES)

    @classmethod
    def load(cls, directory: str | Path) -> BM25Index:
        """Read an index written by :meth:`save` (arrays memory-mapped)."""
        root = Path(directory)
        try:
            arrays = [np.load(root / name, mmap_mode="r", allow_pickle=False) for name in _FILES[:4]]
            meta = json.loads((root / _FILES[4]).read_text(encoding="utf-8"))
            terms, params = meta["terms"], meta["params"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LocalIndexError(f"BM25 files in {root} are missing or corrupt ({exc}); rebuild the index") from None
        term_ptr, doc_ids, tf, doc_len = arrays
        if (
            term_ptr.shape[0] != len(terms) + 1
            or doc_ids.shape != tf.shape
            or int(term_ptr[-1]) != doc_ids.shape[0]
            or (doc_ids.size and int(doc_ids.max()) >= doc_len.shape[0])
        ):
            raise LocalIndexError(f"BM25 files in {root} are inconsistent with each other; rebuild the index")
        return cls({t: i for i, t in enumerate(terms)}, term_ptr, doc_ids, tf, doc_len, **params)
