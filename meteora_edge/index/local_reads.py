"""Reading an opened local index version: chunk records, kNN and BM25 search, vectors, a summary.

:class:`LocalReads` holds what :class:`~meteora_edge.index.local_index.LocalIndex` answers once a
version is open; ``local_index`` opens versions and writes new ones. The arrays it reads are
those ``LocalIndex.__init__`` set from a snapshot.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ..errors import InputError, LocalIndexError
from ..models.encoders import normalize_rows
from ..models.vectors import top_k_indices
from .ann_index import EXACT_BELOW, AnnIndex
from .content_hashes import source_counts

if TYPE_CHECKING:
    from ..models.analyzer import Analyzer
    from ..models.bm25 import BM25Index
    from ..models.sparse_index import SparseIndex
    from .segments import CombinedBM25, DeltaSegment
    from .sources import SourceEntry

__all__ = ["LocalReads", "RowReader", "reopened"]


class LocalReads:
    """The read side of an opened index version (records, search, vectors, :meth:`info`)."""

    root: Path
    generation: int | None
    manifest: dict[str, Any]
    dimension: int
    base_count: int
    id_count: int
    offsets: np.ndarray
    analyzer: Analyzer
    delta: DeltaSegment
    deleted: np.ndarray
    bm25: BM25Index | CombinedBM25
    lexical_scorer: str
    sparse: SparseIndex | None
    ann: AnnIndex | None
    _base_vectors: np.ndarray
    _vector_rows: RowReader | None
    _live: np.ndarray | None
    _chunks: BinaryIO
    _chunk_bytes: int
    _sources_file: BinaryIO | None

    @property
    def sources(self) -> dict[str, SourceEntry]:  # LocalIndex reads its source table
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The stored chunk records for ``ids``, read from this version's open chunk files.

        Raises:
            InputError: an id outside the index, or of a removed chunk.
        """
        ids = [int(i) for i in ids]
        if self._live is not None:
            for i in ids:
                if 0 <= i < self.id_count and not self._live[i]:
                    raise InputError(f"chunk id {i} was removed from the index (its source was replaced or removed)")
        return self.stored_records(ids)

    def stored_records(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """:meth:`records`, removed chunks included (they stay stored until a compaction)."""
        out = []
        fd = self._chunks.fileno()
        for i in map(int, ids):
            if not 0 <= i < self.id_count:
                raise InputError(f"chunk id {i} is outside the index (0..{self.id_count - 1})")
            if i < self.base_count:
                start = int(self.offsets[i])
                end = int(self.offsets[i + 1]) if i + 1 < self.base_count else self._chunk_bytes
                raw = os.pread(fd, end - start, start)
            else:
                raw = self.delta.line(i - self.base_count)
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if not isinstance(record, dict) or record.get("id") != i or not isinstance(record.get("text"), str):
                raise LocalIndexError(
                    f"chunk record {i} of {self.root} is not where its offset says; rebuild the index"
                )
            out.append(record)
        return out

    def search(self, query_vector: np.ndarray, k: int, *, exact: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Cosine kNN: the ``k`` nearest chunk ids and their scores, best first.

        Args:
            query_vector: the query's embedding.
            k: how many neighbours.
            exact: ``None`` (the default) uses the index's ANN structure when it has one and
                holds at least :data:`~meteora_edge.index.ann_index.EXACT_BELOW` chunks, else
                reads every vector; ``True`` always reads every vector; ``False`` always uses
                the ANN structure. ANN candidates are scored with their exact cosines.

        Raises:
            InputError: a query of another dimension, or ``exact=False`` on an index without ANN.
        """
        q = normalize_rows(np.asarray(query_vector, dtype=np.float32).reshape(1, -1))[0]
        if q.shape[0] != self.dimension:
            raise InputError(f"query vector has dimension {q.shape[0]}, the index {self.dimension}")
        if exact is False and self.ann is None:
            raise InputError(f"index {self.root} has no ANN structure; rebuild it with 'index build --ann ivf'")
        if self.ann is not None and (exact is False or (exact is None and len(self) >= EXACT_BELOW)):
            candidates = self.ann.candidates(q, k + len(self.deleted))
            candidates = np.concatenate([candidates, np.arange(self.base_count, self.id_count)])
            scores = np.asarray(self.vectors_for(candidates, include_removed=True) @ q)
        else:
            candidates = None
            scores = np.asarray(self._base_vectors @ q)
            if len(self.delta):
                scores = np.concatenate([scores, self.delta.vectors @ q])
        if self._live is not None:
            scores[~self._live[candidates if candidates is not None else slice(None)]] = -np.inf
        best = top_k_indices(scores, k)
        best = best[np.isfinite(scores[best])]
        return (candidates[best] if candidates is not None else best), scores[best]

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """BM25 over the whole index: the ``k`` best chunk ids with a positive score."""
        return self.bm25.search(query, k)

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray:
        """BM25 of ``text`` (this package's own, as in :meth:`bm25_search`) for each of ``ids``."""
        return self.bm25.text_scores_for(text, ids)

    def sparse_search(self, query: str, k: int, *, model: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The learned-sparse postings over the whole index: the ``k`` best chunk ids with a positive score.

        ``model`` encodes the query (default: the one the index was opened with); it must be the model
        that built the postings.

        Raises:
            InputError: the index holds no sparse postings, or no sparse model to encode the query.
            LocalIndexError: ``model`` is another model than the one that built the postings.
        """
        scores = self._sparse_query_scores(query, model)
        if self._live is not None:
            scores[~self._live] = -np.inf
        best = top_k_indices(scores, k)
        best = best[scores[best] > 0]
        return best, scores[best]

    def sparse_scores(self, text: str, ids: Sequence[int], *, model: Any = None) -> np.ndarray:
        """The sparse model's score of ``text`` for each of ``ids`` (``model`` as in :meth:`sparse_search`)."""
        return self._sparse_query_scores(text, model)[np.asarray(list(ids), dtype=np.int64)]

    def _sparse_query_scores(self, text: str, model: Any) -> np.ndarray:
        if self.sparse is None:
            raise InputError(f"index {self.root} holds no sparse postings; rebuild it with --lexical-scorer sparse")
        if model is None:
            if self.sparse.encoder is None:
                raise InputError(f"index {self.root} was built with the sparse model {self.sparse.encoder_identity!r}: "
                                 "open it with the bundle that holds it")
            return self.sparse.text_scores(text)
        if getattr(model, "identity", None) != self.sparse.encoder_identity:
            raise LocalIndexError(f"index {self.root} holds the postings of the sparse model "
                                  f"{self.sparse.encoder_identity!r}, not {getattr(model, 'identity', None)!r}; "
                                  "use the same --bundle or rebuild the index")
        return self.sparse.vector_scores(model.encode_sparse([text])[0])

    def vectors_for(self, ids: Sequence[int], *, include_removed: bool = False) -> np.ndarray:
        """The L2-normalised vectors of ``ids`` (float32; the base segment's are read from the mapped file)."""
        wanted = np.asarray(list(ids) if not isinstance(ids, (range, np.ndarray)) else ids, dtype=np.int64)
        if isinstance(ids, range) and ids == range(self.id_count) and not len(self.delta):
            return np.asarray(self._base_vectors, dtype=np.float32)
        if wanted.size and (wanted.min() < 0 or wanted.max() >= self.id_count):
            bad = int(wanted[(wanted < 0) | (wanted >= self.id_count)][0])
            raise InputError(f"chunk id {bad} is outside the index (0..{self.id_count - 1})")
        if not include_removed and self._live is not None and not self._live[wanted].all():
            raise InputError(f"chunk id {int(wanted[~self._live[wanted]][0])} was removed from the index")
        out = np.empty((wanted.size, self.dimension), dtype=np.float32)
        in_base = wanted < self.base_count
        base_ids = wanted[in_base]
        out[in_base] = self._vector_rows.rows(base_ids) if self._vector_rows else self._base_vectors[base_ids]
        out[~in_base] = self.delta.vectors[wanted[~in_base] - self.base_count]
        return out

    def info(self) -> dict[str, Any]:
        """A summary: path, version, counts, encoder, chunking, dates and size in bytes.

        ``sources`` counts the files indexed and ``documents`` the documents in them (both
        ``None`` over 200 000 chunks).
        """
        if self._sources_file is not None or len(self.deleted):  # the source table, when stored, counts without reading
            files = len(self.sources) or None
            documents = sum(len(e.documents) for e in self.sources.values()) or None
        else:
            files, documents = source_counts(self)
        return {
            "path": str(self.root),
            "format_version": self.manifest["format_version"],
            "generation": self.generation,
            "chunks": len(self),
            "sources": files,
            "segments": self.manifest.get("segments"),
            "documents": documents,
            "encoder": self.manifest["encoder"],
            "chunking": self.manifest["chunking"],
            "bm25_terms": len(self.bm25.vocab),
            "analyzer": self.analyzer.record(),
            "lexical_scorer": self.lexical_scorer,
            "sparse_model": self.sparse.encoder_identity if self.sparse is not None else None,
            "sparse_postings": self.sparse.n_postings if self.sparse is not None else None,
            "ann": self.manifest.get("ann"),
            "created": self.manifest.get("created"),
            "updated": self.manifest.get("updated"),
            "last_write": self.manifest.get("last_write"),
            "bytes": sum(e["size"] for e in self.manifest["files"].values()),
        }


def reopened(handle: BinaryIO, owner: object) -> BinaryIO:
    """A duplicate of the snapshot's open ``handle`` (which is closed after loading), closed with ``owner``."""
    duplicate = os.fdopen(os.dup(handle.fileno()), "rb")
    weakref.finalize(owner, duplicate.close)
    return duplicate


class RowReader:
    """Reads a few rows of the base vectors with ``pread`` instead of through the memory map: a
    fault in a mapping can map a whole large page-cache folio (megabytes), so a few hundred
    scattered rows would make the resident size grow by hundreds of megabytes at a million chunks."""

    _MOST = 4096  # beyond this many rows the mapping reads them (an exact scan reads everything anyway)

    def __init__(self, handle: BinaryIO, offset: int, dimension: int, mapped: np.ndarray) -> None:
        self._file, self._offset, self._width, self._mapped = handle, offset, dimension * 4, mapped
        self._dimension = dimension

    @classmethod
    def of(cls, handle: BinaryIO, mapped: np.ndarray) -> RowReader | None:
        """A reader over the ``.npy`` file ``handle`` that ``mapped`` maps, or None when nothing is mapped."""
        offset = getattr(mapped, "offset", None)
        if offset is None or mapped.ndim != 2:
            return None
        reader = cls(os.fdopen(os.dup(handle.fileno()), "rb"), int(offset), int(mapped.shape[1]), mapped)
        weakref.finalize(reader, reader._file.close)
        return reader

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The rows ``ids`` (each within the array), float32."""
        if ids.size > self._MOST:
            return np.asarray(self._mapped[ids])
        fd, width, offset = self._file.fileno(), self._width, self._offset
        data = b"".join(os.pread(fd, width, offset + int(i) * width) for i in ids.tolist())
        return np.frombuffer(data, dtype="<f4").reshape(ids.size, self._dimension)
