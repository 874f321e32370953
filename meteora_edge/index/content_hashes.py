"""Which documents an index already holds, by the sha256 of their chunks' text.

``index add`` uses this to stay idempotent: a document is *known* when every chunk it would
make (with the index's own chunking) has the hash of a stored chunk, so re-adding the same
files adds nothing, while a changed document is added whole. Only the hashes of the new
documents are kept in memory; the stored chunks are read in batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from .chunking import chunk_text, stored_boundaries
from .corpus import SourceDocument

__all__ = ["unseen_documents", "record_file", "source_counts"]

_READ_BATCH = 4096  # stored records read at a time


class _Records(Protocol):
    manifest: dict[str, Any]

    def __len__(self) -> int: ...

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]: ...


def _text_hash(text: str) -> str:
    # UTF-8 (the default); a lone surrogate is hashed too, so that the writer, not this check,
    # refuses it with a clear message
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()


def _each_record(index: _Records) -> Iterator[dict[str, Any]]:
    """Every stored record, read a batch at a time: through the index's own ``each_record`` when it has
    one (a Milvus collection, whose ids have gaps once chunks were deleted), else in id order."""
    each = getattr(index, "each_record", None)
    if each is not None:
        yield from each()
        return
    for lo in range(0, len(index), _READ_BATCH):
        yield from index.records(range(lo, min(lo + _READ_BATCH, len(index))))


def _stored(index: _Records, wanted: set[str]) -> set[str]:
    """The hashes in ``wanted`` that belong to a stored chunk (the record's own ``sha256`` when
    the index stores one, else the hash of its text); reading stops once all are found. An index
    that can look hashes up itself (``stored_hashes``, a Milvus collection) is asked instead."""
    lookup = getattr(index, "stored_hashes", None)
    if lookup is not None:
        return set(lookup(wanted))
    found: set[str] = set()
    for record in _each_record(index):
        if len(found) == len(wanted):
            break
        stored = record.get("sha256")
        digest = stored if isinstance(stored, str) else _text_hash(record["text"])
        if digest in wanted:
            found.add(digest)
    return found


def unseen_documents(index: _Records, documents: Sequence[SourceDocument]) -> list[SourceDocument]:
    """The documents that are not already in ``index`` (in their order).

    Args:
        index: a :class:`~meteora_edge.index.local_index.LocalIndex` (its chunking and records).
        documents: the documents about to be added.
    """
    chunking = index.manifest["chunking"]
    per_document = [
        {_text_hash(c.text) for c in chunk_text(d.text, chunking["chunk_size"], chunking["overlap"],
                                                boundaries=stored_boundaries(chunking))} if d.text.strip() else set()
        for d in documents
    ]
    stored = _stored(index, set().union(*per_document))
    return [d for d, hashes in zip(documents, per_document) if not hashes or not hashes <= stored]


def record_file(record: dict[str, Any]) -> Any:
    """The file a stored chunk came from (older indexes: the metadata's source, else the document id)."""
    meta = record.get("metadata")
    return record.get("file") or (meta.get("source") if isinstance(meta, dict) else None) or record["source"]


def source_counts(index: _Records, *, limit: int = 200_000) -> tuple[int | None, int | None]:
    """``(files, documents)``: how many files and documents the index's chunks came from
    (``(None, None)`` over ``limit`` chunks, where reading every record would be slow)."""
    documents: set[Any] = set()
    files: set[Any] = set()
    if len(index) <= limit:
        for record in _each_record(index):
            documents.add(record["source"])
            files.add(record_file(record))
    return (len(files) or None), (len(documents) or None)
