"""What an opened Milvus collection answers: records, vectors, kNN, BM25 and learned-sparse search, and
a summary (see :mod:`.milvus_index`, whose :class:`~.milvus_index.MilvusIndex` opens and writes it)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CollectionError, InputError
from ..models.encoders import normalize_rows
from .content_hashes import source_counts
from .milvus_collection import PREFIX, RECORD_FIELDS, call, id_filter
from .milvus_sparse import FIELD as SPARSE_FIELD, as_milvus

__all__ = ["MilvusReads", "FETCH_BATCH", "TOP_K"]

FETCH_BATCH = 4096
TOP_K = 16_384  # Milvus's largest search limit
_WORD = re.compile(r"\w", re.UNICODE)
_P = PREFIX


class MilvusReads:
    """The reading half of :class:`~.milvus_index.MilvusIndex`: every method here reads the collection
    through ``client`` at ``location`` and the settings the index checked when it opened."""

    client: Any
    location: Any
    count: int
    manifest: dict[str, Any]
    properties: dict[str, str]
    full_text: bool
    analyzer: Any
    lexical_scorer: str
    sparse_model_id: str | None
    sparse_encoder: Any

    def check_sparse_model(self, model: Any) -> None:  # pragma: no cover - MilvusIndex defines it
        raise NotImplementedError

    def fetch_rows(self, ids: Sequence[int], fields: list[str]) -> dict[int, dict[str, Any]]:
        """The rows of ``ids`` by id (``fields`` of each). Raises InputError for an id that is not stored."""
        found: dict[int, dict[str, Any]] = {}
        wanted = [int(i) for i in ids]
        for lo in range(0, len(wanted), FETCH_BATCH):
            part = wanted[lo : lo + FETCH_BATCH]
            rows = call(self.location, "query", self.client.query, self.location.collection,
                         filter=id_filter(part), output_fields=fields, limit=len(part))
            found.update({int(row["id"]): row for row in rows})
        absent = [i for i in wanted if i not in found]
        if absent:
            raise InputError(f"chunk id {absent[0]} is not in collection {self.location.label} (0..{self.count - 1})")
        return found

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The stored chunk records for ``ids`` (the same keys a local index stores)."""
        rows = self.fetch_rows(ids, list(RECORD_FIELDS))
        return [{"id": int(i), **{k: rows[int(i)].get(k) for k in RECORD_FIELDS}} for i in ids]

    def vectors_for(self, ids: Sequence[int]) -> np.ndarray:
        """The chunks' vectors (float32, L2-normalised), fetched from Milvus."""
        if len(ids) == 0:
            return np.zeros((0, self.manifest["encoder"]["dimension"]), dtype=np.float32)
        rows = self.fetch_rows(ids, ["vector"])
        return normalize_rows(np.asarray([rows[int(i)]["vector"] for i in ids], dtype=np.float32)).astype(np.float32)

    def search(self, query_vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Cosine kNN in Milvus: the ``k`` (at most 16 384) nearest chunk ids and their cosines, best first."""
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.manifest["encoder"]["dimension"]:
            raise InputError(f"query vector has dimension {q.shape[0]}, "
                             f"the index {self.manifest['encoder']['dimension']}")
        if k <= 0 or self.count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        hits = call(self.location, "search", self.client.search, self.location.collection, data=[q.tolist()],
                     anns_field="vector", limit=min(k, self.count, TOP_K), search_params={"metric_type": "COSINE"})[0]
        return _ranked([(int(h["id"]), float(h["distance"])) for h in hits], np.float32)

    def _full_text(self, text: str, limit: int, id_filter: str = "") -> list[tuple[int, float]]:
        if not self.full_text:
            raise CollectionError(f"collection {self.location.label} has no BM25 function (full-text search needs "
                                  "Milvus 2.5 or later and a collection built by it); use --scoring dense --n-min 0")
        if not _WORD.search(text) or limit <= 0:
            return []
        hits = call(self.location, "full-text search", self.client.search, self.location.collection, data=[text],
                     anns_field="sparse", limit=limit, filter=id_filter, search_params={"metric_type": "BM25"})[0]
        # Milvus reports BM25 as a score; Milvus Lite 3.2 as its negative (a distance): the magnitude is the score
        return [(int(h["id"]), abs(float(h["distance"]))) for h in hits if float(h["distance"]) != 0.0]

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Milvus's full-text (BM25) search over the collection: the ``k`` best ids with a positive score."""
        return _ranked(self._full_text(query, min(k, TOP_K)), np.float64)

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray:
        """Milvus's BM25 score of ``text`` for each of ``ids`` (0 where no term matches)."""
        scores = np.zeros(len(ids), dtype=np.float64)
        if len(ids) == 0:
            return scores
        unique = sorted({int(i) for i in ids})
        found: dict[int, float] = {}
        for lo in range(0, len(unique), TOP_K):
            part = unique[lo : lo + TOP_K]
            found.update(self._full_text(text, len(part), id_filter(part)))
        for position, chunk_id in enumerate(ids):
            scores[position] = found.get(int(chunk_id), 0.0)
        return scores

    def sparse_search(self, query: str, k: int, *, model: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Milvus's sparse (IP) search over the learned-sparse field: the ``k`` best ids with a positive score.

        ``model`` encodes the query (default: the one the encoder given to :meth:`open` carries); it
        must be the model whose vectors the collection holds.

        Raises:
            InputError: the collection holds no learned-sparse vectors, or no sparse model is at hand.
            CollectionError: ``model`` is another model, or Milvus refused the search.
        """
        return _ranked(self._sparse_hits(query, min(k, TOP_K), "", model), np.float64)

    def sparse_scores(self, text: str, ids: Sequence[int], *, model: Any = None) -> np.ndarray:
        """The sparse model's score of ``text`` for each of ``ids`` (0 where no term is shared)."""
        scores = np.zeros(len(ids), dtype=np.float64)
        unique = sorted({int(i) for i in ids})
        found: dict[int, float] = {}
        for lo in range(0, len(unique), TOP_K):
            part = unique[lo : lo + TOP_K]
            found.update(self._sparse_hits(text, len(part), id_filter(part), model))
        for position, chunk_id in enumerate(ids):
            scores[position] = found.get(int(chunk_id), 0.0)
        return scores

    def _sparse_hits(self, text: str, limit: int, id_filter: str, model: Any) -> list[tuple[int, float]]:
        where = f"collection {self.location.label}"
        if self.sparse_model_id is None:
            raise InputError(f"{where} holds no learned-sparse vectors; rebuild it with --lexical-scorer sparse")
        model = model if model is not None else self.sparse_encoder
        if model is None:
            raise InputError(f"{where} was built with the sparse model {self.sparse_model_id!r}: open it with the "
                             "bundle that holds it")
        self.check_sparse_model(model)
        if limit <= 0 or self.count == 0:
            return []
        query = as_milvus(model.encode_sparse([text])[0])
        if not query:
            return []
        hits = call(self.location, "sparse search", self.client.search, self.location.collection, data=[query],
                    anns_field=SPARSE_FIELD, limit=limit, filter=id_filter, output_fields=["id"],
                    search_params={"metric_type": "IP"})[0]
        return [(int(h["id"]), float(h["distance"])) for h in hits if float(h["distance"]) > 0.0]

    def info(self) -> dict[str, Any]:
        """A summary: backend, location, counts, encoder, chunking and what Milvus indexes."""
        files, documents = source_counts(self)
        return {
            "backend": "milvus",
            "uri": self.location.uri,
            "collection": self.location.collection,
            "chunks": self.count,
            "sources": files,
            "documents": documents,
            "encoder": self.manifest["encoder"],
            "chunking": self.manifest["chunking"],
            "created": self.manifest["created"],
            "format_version": int(self.properties[_P + "format_version"]),
            "analyzer": self.analyzer.record(),
            "full_text_search": self.full_text,
            "lexical_scorer": self.lexical_scorer,
            **({"sparse_model": self.sparse_model_id} if self.sparse_model_id else {}),
        }



def _ranked(hits: list[tuple[int, float]], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Hits best first, ties by the lower id (as the local index orders them)."""
    hits = sorted(hits, key=lambda h: (-h[1], h[0]))
    return np.asarray([h[0] for h in hits], dtype=np.int64), np.asarray([h[1] for h in hits], dtype=dtype)
