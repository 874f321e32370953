"""Reading a base segment and a delta segment as one index (format 3).

An update (``index add``, ``sync``, ``remove``) does not rewrite the index: the new
generation hard-links the base files of the one before, writes the chunks added since the
base (the *delta*: vectors, records and their own BM25 postings, numbered after the base)
and the sorted ids of removed chunks (``deleted.npy``). Readers combine them:

* dense search scores base and delta and drops removed ids;
* BM25 scores each segment's postings with the statistics of both together (document
  count, document frequencies, mean length), so a chunk scores as it would in one index.
  As in Lucene, removed chunks still count in those statistics until the next compaction.

A compaction (``index compact``, or an update once the delta and the removed chunks pass
:func:`needs_compaction`'s threshold) writes one base segment again, without removed chunks.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import LocalIndexError
from ..models.analyzer import Analyzer
from ..models.bm25 import BM25_ARRAYS, BM25_VOCAB, BM25Index, document_norms, okapi_idf
from .manifest import DELTA_FILES, parse_strict_json
from .snapshot import read_npy
from ..models.vectors import top_k_indices

__all__ = ["CombinedBM25", "DeltaSegment", "check_offsets", "read_bm25", "read_delta", "needs_compaction", "COMPACT_MIN_CHUNKS", "COMPACT_FRACTION"]

#: An update compacts once the delta plus removed chunks exceed this many chunks ...
COMPACT_MIN_CHUNKS = 2048
#: ... and this fraction of the base segment.
COMPACT_FRACTION = 0.25


def needs_compaction(base: int, delta: int, deleted: int) -> bool:
    """Whether an update leaving these counts should write one segment again instead."""
    return delta + deleted > max(COMPACT_MIN_CHUNKS, COMPACT_FRACTION * base)


class CombinedBM25:
    """BM25 over a base and a delta segment (delta documents numbered after the base), removed ids excluded.

    Answers the calls :class:`~meteora_edge.index.local_index.LocalIndex` makes on a
    :class:`BM25Index`: ``search``, ``text_scores_for``, ``vocab`` and ``n_docs``.
    """

    def __init__(self, base: BM25Index, delta: BM25Index, deleted: np.ndarray) -> None:
        self.base, self.delta = base, delta
        self.analyzer = base.analyzer
        self.deleted = np.asarray(deleted, dtype=np.int64)
        extra = [term for term in delta.vocab if term not in base.vocab]
        self.vocab = {**base.vocab, **{term: len(base.vocab) + i for i, term in enumerate(extra)}}
        self._statistics: tuple[tuple[np.ndarray, np.ndarray], ...] | None = None  # on first query

    def statistics(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """For each segment, the idf of its terms and the norm of its documents, under the shared
        statistics (what :meth:`BM25Index.term_weights` and :meth:`BM25Index.scores_for` take)."""
        if self._statistics is None:
            base, delta = self.base, self.delta
            to_global = np.empty(len(delta.vocab), dtype=np.int64)
            for term, i in delta.vocab.items():
                to_global[i] = self.vocab[term]
            df = np.zeros(len(self.vocab), dtype=np.float64)
            df[: len(base.vocab)] = np.diff(base.term_ptr)
            np.add.at(df, to_global, np.diff(delta.term_ptr))
            idf = okapi_idf(self.n_docs, df, base.epsilon)
            avgdl = (float(base.doc_len.sum()) + float(delta.doc_len.sum())) / self.n_docs
            self._statistics = tuple(
                (part_idf, document_norms(part.doc_len, avgdl, k1=part.k1, b=part.b))
                for part, part_idf in ((base, idf[: len(base.vocab)]), (delta, idf[to_global])))
        return self._statistics

    @property
    def n_docs(self) -> int:
        return self.base.n_docs + self.delta.n_docs

    def _scores(self, tokens: Sequence[str]) -> np.ndarray:
        out = np.zeros(self.n_docs, dtype=np.float64)
        for part, statistics, shift in zip((self.base, self.delta), self.statistics(), (0, self.base.n_docs)):
            for term in tokens:
                term_id = part.vocab.get(term)
                if term_id is not None:
                    lo, hi = part.term_ptr[term_id], part.term_ptr[term_id + 1]
                    out[part.doc_ids[lo:hi] + shift] += part.term_weights(term_id, statistics)
        out[self.deleted] = 0.0
        return out

    def text_scores(self, text: str) -> np.ndarray:
        return self._scores(self.analyzer.tokens(text))

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best live chunks with a positive score, best first."""
        scores = self.text_scores(query)
        best = top_k_indices(scores, k)
        best = best[scores[best] > 0]
        return best, scores[best]

    def text_scores_for(self, text: str, ids: Sequence[int]) -> np.ndarray:
        tokens = self.analyzer.tokens(text)
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1)
        out = np.zeros(wanted.shape[0], dtype=np.float64)
        for part, statistics, shift in zip((self.base, self.delta), self.statistics(), (0, self.base.n_docs)):
            mine = (wanted >= shift) & (wanted < shift + part.n_docs)
            local = wanted[mine] - shift
            scores = part.scores_for(tokens, local, statistics)
            out[mine] = scores
        return out


class DeltaSegment:
    """The chunks written since the base segment: vectors, record lines and BM25 postings (ids from 0)."""

    def __init__(self, vectors: np.ndarray, offsets: np.ndarray, chunks: BinaryIO | None, size: int,
                 bm25: BM25Index) -> None:
        self.vectors, self.offsets, self.bm25 = vectors, offsets, bm25
        self._chunks = os.fdopen(os.dup(chunks.fileno()), "rb") if chunks is not None else None
        self.size = size
        if self._chunks is not None:
            weakref.finalize(self, self._chunks.close)

    @classmethod
    def empty(cls, dimension: int, like: BM25Index) -> DeltaSegment:
        bm25 = BM25Index.empty(analyzer=like.analyzer, k1=like.k1, b=like.b, epsilon=like.epsilon)
        return cls(np.zeros((0, dimension), dtype=np.float32), np.zeros(0, dtype=np.int64), None, 0, bm25)

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def line(self, i: int) -> bytes:
        """The stored record line of delta chunk ``i``."""
        assert self._chunks is not None
        start = int(self.offsets[i])
        end = int(self.offsets[i + 1]) if i + 1 < len(self) else self.size
        return os.pread(self._chunks.fileno(), end - start, start)

    def chunk_bytes(self) -> bytes:
        """Every record line, as stored."""
        return os.pread(self._chunks.fileno(), self.size, 0) if self._chunks is not None else b""


def check_offsets(offsets: np.ndarray, size: int, chunks: BinaryIO, where: Path) -> None:
    if (
        offsets[0] != 0
        or np.any(np.diff(offsets) <= 0)
        or offsets[-1] >= size
        or os.pread(chunks.fileno(), 1, size - 1) != b"\n"
    ):
        raise LocalIndexError(f"chunk offsets in {where} do not fit chunks.jsonl; rebuild the index")


def read_bm25(handles: dict[str, BinaryIO], prefix: str, where: Path, analyzer: Analyzer) -> BM25Index:
    arrays = [read_npy(handles[prefix + n], dtype=t, shape=None, mmap=True, where=str(where / (prefix + n)))
              for n, t in BM25_ARRAYS]
    vocab = parse_strict_json(handles[prefix + BM25_VOCAB].read(), str(where / (prefix + BM25_VOCAB)), max_bytes=None)
    return BM25Index.from_stored(vocab, *arrays, where=str(where), analyzer=analyzer)


def read_delta(handles: dict[str, BinaryIO], manifest: dict[str, Any], count: int, dim: int, where: Path,
                analyzer: Analyzer) -> DeltaSegment:
    vectors_name, chunks_name, offsets_name = DELTA_FILES[:3]
    vectors = read_npy(handles[vectors_name], dtype=np.dtype("<f4"), shape=(count, dim), mmap=True,
                       where=str(where / vectors_name))
    offsets = read_npy(handles[offsets_name], dtype=np.dtype("<i8"), shape=(count,), mmap=False,
                       where=str(where / offsets_name))
    size = manifest["files"][chunks_name]["size"]
    check_offsets(offsets, size, handles[chunks_name], where)
    bm25 = read_bm25(handles, "delta_", where, analyzer)
    if bm25.n_docs != count:
        raise LocalIndexError(f"index {where}: the delta's BM25 covers {bm25.n_docs} chunks, its vectors {count}; "
                              "rebuild it")
    return DeltaSegment(np.asarray(vectors), offsets, handles[chunks_name], size, bm25)
