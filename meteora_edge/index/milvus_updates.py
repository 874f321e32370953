"""Writes by source to a Milvus collection: add, sync and remove insert the new rows, then delete the old.

:func:`apply_plan` turns an :class:`~meteora_edge.index.updates.UpdatePlan` (the same plans a local
index makes) into rows: each new chunk gets the stored vector of a chunk with the same text or
is embedded, and the rows of a touched source are written again with its new size and time.
:func:`_write` inserts them and deletes the rows they replace, journaled in the collection's
``meteora_edge.pending_add`` (see :mod:`meteora_edge.index.milvus_sources`);
:func:`prepare_write`, which every write runs first, rolls a killed write back or forward and
moves a format-1 collection to format 2.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import InputError
from ..models.encoders import EncoderLike, normalize_rows
from . import milvus_collection as collection
from .chunk_records import Progress, chunk_documents, embed_batches
from .chunking import stored_boundaries
from .milvus_collection import (BUILDING, PREFIX, RECORD_FIELDS, call, chunk_rows, clean_leftovers, collection_schema,
                                drop_quietly, insert_rows, switch_in)
from .milvus_sparse import FIELD as SPARSE_FIELD, encode_rows, sparse_model
from .milvus_sources import SOURCE_FIELDS, Pending, id_ranges, per_chunk, range_filters, source_columns
from .updates import UpdatePlan

if TYPE_CHECKING:
    from .milvus_location import MilvusLocation
    from .sources import SourceEntry


class WritableCollection(Protocol):
    """What writing a plan reads and sets of an opened collection (a
    :class:`~meteora_edge.index.milvus_index.MilvusIndex` is one)."""

    client: Any
    location: MilvusLocation
    count: int
    full_text: bool
    tracks_sources: bool
    sparse_model_id: str | None
    next_id: int
    properties: dict[str, str]
    manifest: dict[str, Any]
    added_chunks: int
    added_documents: int
    removed_chunks: int
    left_out_documents: int

    @classmethod
    def open(cls, location: MilvusLocation, *, client: Any = None) -> WritableCollection: ...

    def check_sparse_model(self, model: Any) -> None: ...

    @property
    def sources(self) -> dict[str, SourceEntry]: ...

    def refresh(self) -> None: ...

    def each_record(self, fields: Sequence[str] | None = None) -> Iterator[dict[str, Any]]: ...

    def fetch_rows(self, ids: Sequence[int], fields: list[str]) -> dict[int, dict[str, Any]]: ...

__all__ = ["prepare_write", "apply_plan", "rows_by_hash", "FORMAT_VERSION", "PENDING", "NEXT_ID"]

#: the collection format that tracks sources (a format-1 collection is migrated to it)
FORMAT_VERSION = 2
_P = PREFIX
PENDING = _P + "pending_add"
NEXT_ID = _P + "next_id"
_HASH_BATCH = 1024  # hashes per query
_TOP_K = 16_384  # Milvus's largest query limit

logger = logging.getLogger(__name__)


def prepare_write(index: WritableCollection) -> None:
    """Before a write: finish or undo what a killed one left, and move a format-1 collection to format 2."""
    _undo_killed_writes(index)
    if not index.tracks_sources:
        _migrate(index)


def apply_plan(index: WritableCollection, plan: UpdatePlan, encoder: EncoderLike | None, *, batch_size: int,
               progress: Progress | None) -> WritableCollection:
    """Insert the plan's new rows (and its touched sources' rows again, with their new size and
    time), then delete the rows they replace: journaled, see :mod:`meteora_edge.index.milvus_sources`."""
    table = index.sources
    removed = sorted(i for key in plan.remove if key in table for i in table[key].chunk_ids())
    touched = [key for key in plan.touch if key in table]
    documents = [d for a in plan.add for d in a.documents]
    chunking = index.manifest["chunking"]
    texts, lines, counts = chunk_documents(documents, index.next_id, chunking["chunk_size"], chunking["overlap"],
                                           stored_boundaries(chunking))
    if index.count - len(removed) + len(lines) == 0:
        raise InputError(f"this would delete every chunk of collection {index.location.label}; drop it instead, "
                         "or build a new one")
    vectors, learned = _stored_or_embedded(index, texts, encoder, batch_size, progress)
    rows = chunk_rows(lines, vectors, per_chunk(source_columns(plan.add), counts))
    for row, vector in zip(rows, learned or ()):
        row[SPARSE_FIELD] = vector
    if touched:
        rows += _touched_rows(index, touched, plan.touch, index.next_id + len(rows))
        removed = sorted({*removed, *(i for key in touched for i in table[key].chunk_ids())})
    index.added_chunks, index.removed_chunks = len(lines), len(removed) - sum(
        len(table[key].chunk_ids()) for key in touched)
    index.added_documents, index.left_out_documents = sum(1 for n in counts if n), plan.left_out
    if rows or removed:
        _write(index, rows, removed)
    return index


def _stored_or_embedded(index: WritableCollection, texts: Sequence[str], encoder: EncoderLike | None, batch_size: int,
                        progress: Progress | None) -> tuple[np.ndarray, list[dict[int, float]] | None]:
    """The new chunks' vectors, and their learned-sparse ones when the collection holds them: those of
    a stored chunk with the same text (a renamed file, the unchanged parts of an edited one), else encoded.

    Raises:
        CollectionError: the collection holds sparse vectors and ``encoder`` carries another sparse model.
        ConfigError: it holds sparse vectors and ``encoder`` carries no sparse model.
    """
    dimension = int(index.manifest["encoder"]["dimension"])
    out = np.zeros((len(texts), dimension), dtype=np.float32)
    sparse = index.sparse_model_id is not None
    if not texts:
        return out, [] if sparse else None
    hashes = [hashlib.sha256(t.encode(errors="surrogatepass")).hexdigest() for t in texts]
    stored = rows_by_hash(index, hashes, ["sha256", "vector", *([SPARSE_FIELD] if sparse else [])])
    embed = [i for i, h in enumerate(hashes) if h not in stored]
    for i, h in enumerate(hashes):
        if h in stored:
            out[i] = stored[h]["vector"]
    learned = [dict(stored[h][SPARSE_FIELD]) if h in stored else {} for h in hashes] if sparse else None
    if embed:
        assert encoder is not None  # only a remove passes none, and it adds no chunk
        if learned is not None:
            model = sparse_model("sparse", encoder)
            index.check_sparse_model(model)
            for i, vector in zip(embed, encode_rows(model, [texts[i] for i in embed], batch_size)):
                learned[i] = vector
        out[embed] = embed_batches(encoder, [texts[i] for i in embed], batch_size, progress)
    return normalize_rows(out).astype(np.float32), learned


def rows_by_hash(index: WritableCollection, hashes: Sequence[str], fields: list[str]) -> dict[str, dict[str, Any]]:
    """One stored row for each of ``hashes`` (a chunk text's sha256) the collection holds, with ``fields``."""
    found: dict[str, dict[str, Any]] = {}
    pending = [sorted(set(hashes))[lo : lo + _HASH_BATCH] for lo in range(0, len(set(hashes)), _HASH_BATCH)]
    while pending:
        part = pending.pop()
        expression = f"sha256 in [{', '.join(json.dumps(h) for h in part)}]"
        rows = call(index.location, "query", index.client.query, index.location.collection, filter=expression,
                    output_fields=fields, limit=_TOP_K)
        if len(rows) == _TOP_K and len(part) > 1:  # the limit may have cut some hashes off: ask in halves
            pending += [part[: len(part) // 2], part[len(part) // 2 :]]
            continue
        for row in rows:
            found.setdefault(row["sha256"], row)
    return found


def _touched_rows(index: WritableCollection, keys: list[str], states: dict[str, tuple[int | None, int | None]],
                  start: int) -> list[dict[str, Any]]:
    """The rows of sources that were touched but read the same, numbered from ``start``, with their new size and time."""
    ids = [i for key in keys for i in index.sources[key].chunk_ids()]
    fields = ["vector", *RECORD_FIELDS, *SOURCE_FIELDS, *([SPARSE_FIELD] if index.sparse_model_id else [])]
    found = index.fetch_rows(ids, fields)
    rows = []
    for key in keys:
        size, mtime = states[key]
        for i in index.sources[key].chunk_ids():
            row = {name: found[i].get(name) for name in fields}
            rows.append({**row, "id": start + len(rows), "source_key": key, "source_size": size,
                         "source_mtime_ns": mtime})
    return rows


def _write(index: WritableCollection, rows: list[dict[str, Any]], removed: Sequence[int]) -> None:
    """Insert ``rows`` (ids from the index's ``next_id``), then delete ``removed``; journaled in the properties."""
    name, first = index.location.collection, index.next_id
    alter, drop = index.client.alter_collection_properties, index.client.drop_collection_properties
    if rows:
        call(index.location, "alter_collection_properties", alter, name,
             properties={PENDING: Pending("insert", first).encode()})
        try:
            insert_rows(index.client, index.location, name, rows)
        except BaseException:
            try:
                index.client.delete(name, filter=f"id >= {first}")
                index.client.drop_collection_properties(name, property_keys=[PENDING])
            except Exception:  # noqa: BLE001 - best effort while the insert error propagates; the next write retries
                pass
            raise
    commit = Pending("delete", first, tuple(id_ranges(removed)))
    call(index.location, "alter_collection_properties", alter, name,
         properties={PENDING: commit.encode(), NEXT_ID: str(first + len(rows))})
    index.next_id = first + len(rows)
    _delete(index, commit.delete)
    call(index.location, "drop_collection_properties", drop, name, property_keys=[PENDING])
    index.refresh()


def _delete(index: WritableCollection, ranges: Sequence[tuple[int, int]]) -> None:
    for expression in range_filters(ranges):
        call(index.location, "delete", index.client.delete, index.location.collection, filter=expression)
    call(index.location, "flush", index.client.flush, index.location.collection)


def _undo_killed_writes(index: WritableCollection) -> None:
    """Drop killed builds' temporary collections; roll a killed write back (still inserting) or
    forward (already deleting)."""
    clean_leftovers(index.client, index.location)
    name = index.location.collection
    description = call(index.location, "describe_collection", index.client.describe_collection, name)
    properties = {str(k): str(v) for k, v in (description.get("properties") or {}).items()}
    index.next_id = int(properties.get(NEXT_ID, index.next_id))  # another writer may have moved it
    value = properties.get(PENDING, "")
    if not value:
        index.refresh()  # and plan against the rows as they are now, not as this object last saw them
        return
    pending = Pending.decode(value, index.location.label)
    before = index.count
    if pending.phase == "insert":
        call(index.location, "delete", index.client.delete, name, filter=f"id >= {pending.first}")
        call(index.location, "flush", index.client.flush, name)
        what = "deleted the %d chunk(s) of a write that did not finish"
    else:
        _delete(index, pending.delete)
        what = "finished a write that was killed (%d chunk(s) deleted)"
    call(index.location, "drop_collection_properties", index.client.drop_collection_properties, name,
         property_keys=[PENDING])
    index.refresh()
    logger.warning("collection %s: " + what, index.location.label, abs(before - index.count))


def _migrate(index: WritableCollection) -> None:
    """Copy a format-1 collection into one with the source fields (unknown for its rows) and switch it in,
    as a rebuild does: the old collection stays in place until the copy is complete."""
    name, location = index.location.collection, index.location
    temporary = f"{name}{BUILDING}{secrets.token_hex(4)}"
    schema, indexes = collection_schema(index.client, int(index.manifest["encoder"]["dimension"]),
                                        english=_P + "analyzer" in index.properties, full_text=index.full_text,
                                        learned_sparse=index.sparse_model_id is not None)
    properties = {k: v for k, v in index.properties.items() if k.startswith(_P) and k != PENDING}
    properties[_P + "format_version"] = str(FORMAT_VERSION)
    call(location, "create_collection", index.client.create_collection, temporary, schema=schema,
         index_params=indexes, properties=properties)
    top = -1
    try:
        batch: list[dict[str, Any]] = []
        copied = ("id", "vector", *RECORD_FIELDS, *([SPARSE_FIELD] if index.sparse_model_id else []))
        for row in index.each_record(list(copied)):
            batch.append({k: row.get(k) for k in copied})
            top = max(top, int(row["id"]))
            if len(batch) == collection.INSERT_BATCH:
                call(location, "insert", index.client.insert, temporary, batch)
                batch = []
        if batch:
            call(location, "insert", index.client.insert, temporary, batch)
        call(location, "flush", index.client.flush, temporary)
        call(location, "alter_collection_properties", index.client.alter_collection_properties, temporary,
             properties={NEXT_ID: str(top + 1)})
    except BaseException:
        drop_quietly(index.client, temporary)
        raise
    switch_in(index.client, location, temporary)
    migrated = type(index).open(location, client=index.client)
    index.__dict__.update({k: v for k, v in migrated.__dict__.items() if k != "client"})
    logger.warning("collection %s: moved to format %d (each chunk now records its source file)", location.label,
                   FORMAT_VERSION)
