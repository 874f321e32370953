"""BM25 (Okapi) over postings stored as flat numpy arrays.

The index keeps, per term, the documents that contain it and the term's frequency in each; a
query computes the BM25 weight of each posting of its terms
(``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``, float64 rounded to float32,
those of recently queried terms kept) and sums a few array slices plus a top-k, so an index of
any size costs no memory per posting beyond its mapped files. Scores equal ``rank_bm25.BM25Okapi``'s
for the same tokens (including its epsilon floor for negative idf); the test suite checks
that parity. Everything persists as ``.npy`` files (memory-mapped on load) and a JSON
vocabulary; nothing is pickled.

The index scores tokens; which tokens a text gives is its :class:`~meteora_edge.models.analyzer.Analyzer`'s
business. :meth:`BM25Index.from_texts` analyses documents and remembers the analyser, so
:meth:`~BM25Index.search` and :meth:`~BM25Index.text_scores` analyse a query the same way.
"""

from __future__ import annotations

import json
import mmap
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, LocalIndexError
from .analyzer import DEFAULT_ANALYZER, LEGACY_ANALYZER, Analyzer
from .vectors import best_positive

__all__ = ["BM25Index", "bm25_tokens", "okapi_idf", "document_norms", "posting_weights", "BM25_ARRAYS", "BM25_VOCAB"]

#: The stored arrays, in order: term_ptr (int64), doc_ids, tf, doc_len (int32).
BM25_ARRAYS = (
    ("bm25_term_ptr.npy", np.dtype("<i8")),
    ("bm25_doc_ids.npy", np.dtype("<i4")),
    ("bm25_tf.npy", np.dtype("<i4")),
    ("bm25_doc_len.npy", np.dtype("<i4")),
)
#: The vocabulary and parameters: ``{"params": {"k1", "b", "epsilon"}, "terms": [...]}``.
BM25_VOCAB = "bm25_vocab.json"
_PARAMS = ("k1", "b", "epsilon")
_CHECK_BLOCK = 1 << 20  # postings checked at a time when an index is loaded
_RECENT_POSTINGS = 1 << 23  # weights kept for recently queried terms: 32 MB of float32


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased unicode word runs: the ``unicode-words`` analyser (indexes that record no analyser)."""
    return LEGACY_ANALYZER.tokens(text)


class BM25Index:
    """An immutable BM25 index; :meth:`extend` returns a new one.

    Args:
        vocab: term → term id.
        term_ptr: ``len(vocab) + 1`` offsets into ``doc_ids``/``tf`` (postings grouped by term).
        doc_ids: document of each posting.
        tf: term frequency of each posting.
        doc_len: token count of each document.
        k1, b, epsilon: the Okapi parameters (rank-bm25's defaults).
        analyzer: how :meth:`search` and :meth:`text_scores` turn a query into tokens — the
            analyser the documents' tokens came from (``unicode-words``, i.e. :func:`bm25_tokens`,
            unless said; :meth:`from_texts` records its own).
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
        analyzer: Analyzer = LEGACY_ANALYZER,
    ) -> None:
        if not (k1 >= 0 and 0 <= b <= 1 and epsilon >= 0):
            raise ConfigError(f"BM25 needs k1 >= 0, 0 <= b <= 1, epsilon >= 0; got k1={k1}, b={b}, epsilon={epsilon}")
        self.vocab = vocab
        self.term_ptr = term_ptr
        self.doc_ids = doc_ids
        self.tf = tf
        self.doc_len = doc_len
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.analyzer = analyzer
        self._statistics: tuple[np.ndarray, np.ndarray] | None = None  # idf per term, norm per document
        self._recent: dict[int, np.ndarray] = {}  # weights of recently queried terms, at most _RECENT_POSTINGS

    @property
    def n_docs(self) -> int:
        return int(self.doc_len.shape[0])

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], *, analyzer: Analyzer = LEGACY_ANALYZER,
              **params: float) -> BM25Index:
        """Index documents given as token lists (made by ``analyzer``, see :func:`bm25_tokens`)."""
        return cls.empty(analyzer=analyzer, **params).extend(token_lists)

    @classmethod
    def from_texts(cls, texts: Iterable[str], *, analyzer: Analyzer = DEFAULT_ANALYZER) -> BM25Index:
        """Index documents given as texts, analysed by ``analyzer`` (the default: ``english``)."""
        return cls.build((analyzer.tokens(t) for t in texts), analyzer=analyzer)

    @classmethod
    def empty(cls, *, analyzer: Analyzer = LEGACY_ANALYZER, **params: float) -> BM25Index:
        zero = np.zeros(0, dtype=np.int32)
        return cls({}, np.zeros(1, dtype=np.int64), zero, zero, zero, analyzer=analyzer, **params)

    def extend_texts(self, texts: Iterable[str]) -> BM25Index:
        """A new index holding this one's documents followed by ``texts``, analysed as this index's were."""
        return self.extend(self.analyzer.tokens(t) for t in texts)

    def extend(self, token_lists: Iterable[Sequence[str]]) -> BM25Index:
        """A new index holding this one's documents followed by ``token_lists``."""
        vocab = dict(self.vocab)
        # typed buffers, not lists of ints: 12 bytes a posting instead of about 100 (a 1M-chunk build)
        terms, docs, freqs, lengths = array("q"), array("i"), array("i"), array("i")
        for doc, tokens in enumerate(token_lists, start=self.n_docs):
            lengths.append(len(tokens))
            for term, count in Counter(tokens).items():
                terms.append(vocab.setdefault(term, len(vocab)))
                docs.append(doc)
                freqs.append(count)
        old_terms = np.repeat(np.arange(len(self.vocab), dtype=np.int64), np.diff(self.term_ptr))
        all_terms = np.concatenate([old_terms, np.frombuffer(terms, dtype=np.int64)])
        all_docs = np.concatenate([self.doc_ids, np.frombuffer(docs, dtype=np.int32)])
        all_tf = np.concatenate([self.tf, np.frombuffer(freqs, dtype=np.int32)])
        del terms, docs, freqs
        # documents come in ascending order (the old ones first), so a stable sort by term alone
        # orders the postings by (term, document)
        order = np.argsort(all_terms, kind="stable")
        counts = np.bincount(all_terms, minlength=len(vocab))
        term_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return BM25Index(
            vocab,
            term_ptr,
            all_docs[order].astype(np.int32),
            all_tf[order].astype(np.int32),
            np.concatenate([self.doc_len, np.frombuffer(lengths, dtype=np.int32)]),
            k1=self.k1,
            b=self.b,
            epsilon=self.epsilon,
            analyzer=self.analyzer,
        )

    def statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """The idf of every term (rank-bm25's, floored at epsilon times the mean) and the length
        norm of every document (:func:`document_norms`), computed on the first query."""
        if self._statistics is None:
            n = self.n_docs
            avgdl = float(self.doc_len.sum() / n) if n else 1.0
            idf = okapi_idf(n, np.diff(self.term_ptr).astype(np.float64), self.epsilon)
            self._statistics = (idf, document_norms(self.doc_len, avgdl, k1=self.k1, b=self.b))
        return self._statistics

    def term_weights(self, term_id: int, statistics: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """The BM25 weight (float32) of each posting of ``term_id``, in posting order.

        Computed when asked, from the term's postings alone, so an index of any size costs no
        memory per posting beyond its mapped files. ``statistics`` replaces this index's own
        (:meth:`statistics`; an index combined with another scores with shared ones)."""
        own = statistics is None
        if own and term_id in self._recent:
            return self._recent[term_id]
        idf, norms = self.statistics() if statistics is None else statistics
        lo, hi = int(self.term_ptr[term_id]), int(self.term_ptr[term_id + 1])
        weights = posting_weights(self.tf[lo:hi], norms[self.doc_ids[lo:hi]], idf[term_id], k1=self.k1)
        if own and hi - lo <= _RECENT_POSTINGS:  # frequent terms recur across queries: keep recent ones
            recent = self._recent
            if sum(w.size for w in list(recent.values())) + hi - lo > _RECENT_POSTINGS:
                recent = self._recent = {}  # full: start again (a new dict, so concurrent queries never see it shrink)
            weights.flags.writeable = False  # callers share it
            recent[term_id] = weights
        return weights

    def documents_with(self, term: str) -> np.ndarray:
        """The documents holding ``term`` (an analysed token), each once; empty when none does.

        A read-only view of the index's postings (no copy; writing to it would change the index)."""
        term_id = self.vocab.get(term)
        if term_id is None:
            return np.array([], dtype=np.int64)
        postings = self.doc_ids[self.term_ptr[term_id]:self.term_ptr[term_id + 1]].view()
        postings.flags.writeable = False
        return postings

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for the query tokens (repeats count again)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in query_tokens:
            term_id = self.vocab.get(term)
            if term_id is None:
                continue
            lo, hi = self.term_ptr[term_id], self.term_ptr[term_id + 1]
            out[self.doc_ids[lo:hi]] += self.term_weights(term_id)  # a term's postings name each document once
        return out

    def scores_for(self, query_tokens: Sequence[str], docs: Sequence[int],
                   statistics: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """The BM25 score of the query tokens for each of ``docs``: ``scores(query_tokens)[docs]``,
        summed in the same order, without touching the other documents (postings are sorted by
        document within a term, so each term is a binary search). ``statistics``: the idf of each
        of this index's terms and the norm of each of its documents, in place of its own (an index
        combined with another scores with shared statistics)."""
        idf, norms = self.statistics() if statistics is None else statistics
        wanted = np.asarray(docs, dtype=np.int64).reshape(-1)
        out = np.zeros(wanted.shape[0], dtype=np.float64)
        for term in query_tokens:
            term_id = self.vocab.get(term)
            if term_id is None or wanted.size == 0:
                continue
            lo, hi = self.term_ptr[term_id], self.term_ptr[term_id + 1]
            postings = self.doc_ids[lo:hi]
            at = np.searchsorted(postings, wanted)
            found = at < postings.shape[0]
            found[found] = postings[at[found]] == wanted[found]
            hits = at[found]
            out[found] += posting_weights(self.tf[lo:hi][hits], norms[postings[hits]], idf[term_id], k1=self.k1)
        return out

    def text_scores(self, text: str) -> np.ndarray:
        """:meth:`scores` of ``text`` analysed by this index's analyser."""
        return self.scores(self.analyzer.tokens(text))

    def text_scores_for(self, text: str, docs: Sequence[int]) -> np.ndarray:
        """:meth:`scores_for` of ``text`` analysed by this index's analyser."""
        return self.scores_for(self.analyzer.tokens(text), docs)

    def search(self, query: str, k: int, *, within: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best documents with a positive score, best first.

        Args:
            query: the query text (analysed by this index's analyser).
            k: how many to return at most.
            within: restrict to these document ids.

        Returns:
            ``(doc_ids, scores)``.
        """
        return best_positive(self.text_scores(query), k, within)

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored arrays by file name (see :data:`BM25_ARRAYS`)."""
        values = (self.term_ptr, self.doc_ids, self.tf, self.doc_len)
        return {name: np.ascontiguousarray(a, dtype=dtype) for (name, dtype), a in zip(BM25_ARRAYS, values)}

    def vocab_document(self) -> dict[str, Any]:
        """The JSON object stored as :data:`BM25_VOCAB`."""
        return {"params": {"k1": self.k1, "b": self.b, "epsilon": self.epsilon}, "terms": list(self.vocab)}

    def save(self, directory: str | Path) -> list[str]:
        """Write the index files into ``directory``; return their names."""
        root = Path(directory)
        for name, array in self.arrays().items():
            np.save(root / name, array)
        (root / BM25_VOCAB).write_text(json.dumps(self.vocab_document()), encoding="utf-8")
        return [*self.arrays(), BM25_VOCAB]

    @classmethod
    def load(cls, directory: str | Path, *, analyzer: Analyzer = LEGACY_ANALYZER) -> BM25Index:
        """Read an index written by :meth:`save` (arrays memory-mapped); ``analyzer`` made its tokens."""
        root = Path(directory)
        try:
            arrays = [np.load(root / name, mmap_mode="r", allow_pickle=False) for name, _ in BM25_ARRAYS]
            vocab = json.loads((root / BM25_VOCAB).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LocalIndexError(f"BM25 files in {root} are missing or corrupt ({exc}); rebuild the index") from None
        return cls.from_stored(vocab, *arrays, where=str(root), analyzer=analyzer)

    @classmethod
    def from_stored(
        cls,
        vocab_document: Any,
        term_ptr: np.ndarray,
        doc_ids: np.ndarray,
        tf: np.ndarray,
        doc_len: np.ndarray,
        *,
        where: str,
        analyzer: Analyzer = LEGACY_ANALYZER,
    ) -> BM25Index:
        """Rebuild an index from its stored parts, checking that they fit together.

        Args:
            vocab_document: the parsed :data:`BM25_VOCAB` object.
            term_ptr, doc_ids, tf, doc_len: the arrays of :data:`BM25_ARRAYS`.
            where: names the index in error messages.
            analyzer: the analyser the stored terms came from (the index manifest records it).

        Raises:
            LocalIndexError: a wrong shape or type, an unknown parameter, or arrays that
                contradict each other (which would give wrong scores or crash a query).
        """
        terms, params = _check_vocab_document(vocab_document, where)
        for (name, _), array in zip(BM25_ARRAYS, (term_ptr, doc_ids, tf, doc_len)):
            if array.dtype.kind != "i":
                raise LocalIndexError(f"BM25 array {name} in {where} holds {array.dtype}, expected signed integers; "
                                      "rebuild the index")
        n_docs = doc_len.shape[0] if doc_len.ndim == 1 else -1
        if (
            any(a.ndim != 1 for a in (term_ptr, doc_ids, tf, doc_len))
            or term_ptr.shape[0] != len(terms) + 1
            or doc_ids.shape != tf.shape
            or int(term_ptr[0]) != 0
            or int(term_ptr[-1]) != doc_ids.shape[0]
            or bool(np.any(np.diff(term_ptr) < 0))
            or (doc_len.size and int(doc_len.min()) < 0)
        ):
            raise LocalIndexError(f"BM25 files in {where} are inconsistent with each other; rebuild the index")
        problem = _postings_problem(term_ptr, doc_ids, tf, n_docs)
        if problem == "range":
            raise LocalIndexError(f"BM25 files in {where} are inconsistent with each other; rebuild the index")
        if problem == "order":
            raise LocalIndexError(f"BM25 postings in {where} are not sorted by document within each term; "
                                  "rebuild the index")
        return cls({t: i for i, t in enumerate(terms)}, term_ptr, doc_ids, tf, doc_len, analyzer=analyzer, **params)


def okapi_idf(n: int, df: np.ndarray, epsilon: float) -> np.ndarray:
    """Okapi idf of terms found in ``df`` of ``n`` documents; negative values become ``epsilon``
    times the mean idf (rank-bm25's floor)."""
    idf = np.log(n - df + 0.5) - np.log(df + 0.5)
    if idf.size:
        idf[idf < 0] = epsilon * idf.sum() / idf.size
    return idf


def document_norms(doc_len: np.ndarray, avgdl: float, *, k1: float, b: float) -> np.ndarray:
    """``k1 * (1 - b + b * doc_len / avgdl)`` per document (float64): the length part of BM25's
    denominator, the same for every posting of a document. A mean length of 0 means no document
    has a term, so no posting needs a norm: zeros."""
    if avgdl == 0:
        return np.zeros(np.shape(doc_len), dtype=np.float64)
    return k1 * (1 - b + b * np.asarray(doc_len) / avgdl)


def posting_weights(tf: np.ndarray, norm: np.ndarray, idf: float, *, k1: float) -> np.ndarray:
    """``idf * tf * (k1 + 1) / (tf + norm)`` per posting (``norm``: :func:`document_norms` of each
    posting's document), computed in float64 and returned as float32; each element equals what
    the whole-index computation gives it."""
    tf = np.asarray(tf).astype(np.float64)
    denominator = tf + norm
    out = idf * tf
    out *= k1 + 1
    out /= denominator
    return out.astype(np.float32)


def _postings_problem(term_ptr: np.ndarray, doc_ids: np.ndarray, tf: np.ndarray, n_docs: int) -> str | None:
    """``"range"`` (a document outside the index or a frequency below 1), ``"order"`` (a term's
    postings not naming strictly increasing documents, which :meth:`BM25Index.scores_for` needs)
    or None. Reads the postings a block at a time; mapped pages are given back after each block,
    so checking a file of any size costs a block of memory."""
    total = int(doc_ids.shape[0])
    starts = np.asarray(term_ptr[1:-1], dtype=np.int64)  # postings where a term begins: doc ids may fall there
    for lo in range(0, total, _CHECK_BLOCK):
        hi = min(lo + _CHECK_BLOCK, total)
        docs = np.asarray(doc_ids[max(lo - 1, 0) : hi], dtype=np.int64)
        if int(docs.min()) < 0 or int(docs.max()) >= n_docs or int(np.asarray(tf[lo:hi]).min()) < 1:
            return "range"
        rising = np.diff(docs) > 0  # rising[i]: the step into posting max(lo - 1, 0) + i + 1
        first = max(lo - 1, 0) + 1
        inside = starts[(starts >= first) & (starts < hi)]
        rising[inside - first] = True
        if not rising.all():
            return "order"
        _release(doc_ids, tf)
    return None


def _release(*arrays: np.ndarray) -> None:
    """Give back the resident pages of memory-mapped arrays (they are read from the file again when needed)."""
    for array in arrays:
        mapping = getattr(array, "_mmap", None)
        if mapping is not None and hasattr(mapping, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            mapping.madvise(mmap.MADV_DONTNEED)


def _check_vocab_document(document: Any, where: str) -> tuple[list[str], dict[str, float]]:
    """The terms and parameters of a stored vocabulary, or a LocalIndexError saying what is wrong."""
    problem = None
    if not isinstance(document, dict) or set(document) != {"params", "terms"}:
        problem = "must be an object with exactly 'params' and 'terms'"
    elif not isinstance(document["params"], dict) or set(document["params"]) != set(_PARAMS):
        problem = f"'params' must hold exactly {', '.join(_PARAMS)}"
    elif not all(type(v) in (int, float) and np.isfinite(v) for v in document["params"].values()):
        problem = "'params' must be finite numbers"
    elif not isinstance(document["terms"], list) or not all(isinstance(t, str) for t in document["terms"]):
        problem = "'terms' must be a list of strings"
    elif len(set(document["terms"])) != len(document["terms"]):
        problem = "'terms' repeats a term"
    if problem:
        raise LocalIndexError(f"BM25 vocabulary in {where} is corrupt: {problem}; rebuild the index")
    params = {k: float(document["params"][k]) for k in _PARAMS}
    try:
        BM25Index.empty(**params)
    except ConfigError as exc:
        raise LocalIndexError(f"BM25 vocabulary in {where} is corrupt: {exc}; rebuild the index") from None
    return document["terms"], params
