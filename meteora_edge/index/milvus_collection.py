"""A Milvus collection's lowest layer: the schema, rows, inserts, and switching a complete copy into place.

Used by :mod:`meteora_edge.index.milvus_index` (opening, building, reading) and
:mod:`meteora_edge.index.milvus_updates` (writes by source). Every client call goes through
:func:`call`, so a pymilvus error reaches the user as one :class:`~meteora_edge.errors.CollectionError` line.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CollectionError, InputError
from ..models.analyzer import STOP_WORDS
from .milvus_location import MilvusLocation, milvus_error
from .milvus_sources import add_source_fields

__all__ = ["PREFIX", "LEARNED_SPARSE", "TEXT_BYTES", "INSERT_BATCH", "RECORD_FIELDS", "BUILDING", "REPLACED", "MILVUS_ENGLISH", "call",
           "collection_schema", "chunk_rows", "insert_rows", "id_filter", "switch_in", "restore_switch",
           "clean_leftovers", "drop_quietly"]

#: the prefix of every collection property this package writes
PREFIX = "meteora_edge."
TEXT_BYTES = 65_535
INSERT_BATCH = 512
RECORD_FIELDS = ("text", "sha256", "source", "position", "start", "end", "metadata", "file")
BUILDING, REPLACED = "__building_", "__replaced_"

logger = logging.getLogger(__name__)

#: Milvus's analyser settings for the ``english`` analyser (stop words before stemming, as ours).
MILVUS_ENGLISH = {"tokenizer": "standard",
                  "filter": ["lowercase", {"type": "stop", "stop_words": sorted(STOP_WORDS)},
                             {"type": "stemmer", "language": "english"}]}


#: the field of a collection built with the sparse scorer: each chunk's learned-sparse vector
LEARNED_SPARSE = "learned_sparse"


def call(location: MilvusLocation, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
    """Call the client; a pymilvus error becomes one CollectionError line."""
    from pymilvus.exceptions import MilvusException

    try:
        return method(*args, **kwargs)
    except MilvusException as exc:
        raise CollectionError(f"Milvus {what} failed on {location.label}: {milvus_error(exc)}") from None


def collection_schema(client: Any, dimension: int, *, english: bool = True, full_text: bool = True,
                      learned_sparse: bool = False) -> tuple[Any, Any]:
    """The collection's schema and indexes (``english=False``: Milvus's default analyser, as a collection
    built before analysers were recorded has; ``full_text=False``: no BM25 function, as before Milvus 2.5;
    ``learned_sparse``: the field of a sparse model's vectors, see :mod:`.milvus_sparse`)."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("text", DataType.VARCHAR, max_length=TEXT_BYTES, enable_analyzer=True,
                     **({"analyzer_params": MILVUS_ENGLISH} if english else {}))
    schema.add_field("sha256", DataType.VARCHAR, max_length=64)
    schema.add_field("source", DataType.VARCHAR, max_length=TEXT_BYTES)
    schema.add_field("file", DataType.VARCHAR, max_length=TEXT_BYTES, nullable=True)
    for name in ("position", "start", "end"):
        schema.add_field(name, DataType.INT64)
    schema.add_field("metadata", DataType.JSON)
    add_source_fields(schema, DataType, TEXT_BYTES)
    indexes = client.prepare_index_params()
    indexes.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
    if full_text:
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["text"],
                                     output_field_names=["sparse"]))
        indexes.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                          params={"bm25_k1": 1.5, "bm25_b": 0.75})
    if learned_sparse:  # a sparse model's vectors, scored by dot product (see milvus_sparse)
        schema.add_field(LEARNED_SPARSE, DataType.SPARSE_FLOAT_VECTOR)
        indexes.add_index(field_name=LEARNED_SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    return schema, indexes


def chunk_rows(lines: list[bytes], vectors: np.ndarray, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows to insert: each chunk record with its vector and its source's fields."""
    rows = []
    for line, vector, source in zip(lines, vectors, sources):
        record = json.loads(line)
        if len(record["text"].encode("utf-8")) > TEXT_BYTES:
            raise InputError(f"a chunk of document {record['source']!r} has {len(record['text'].encode('utf-8'))} "
                             f"bytes of text, over Milvus's VARCHAR limit of {TEXT_BYTES}; use a smaller --chunk-size")
        rows.append({"id": record["id"], "vector": vector.tolist(),
                     **{name: record.get(name) for name in RECORD_FIELDS}, **source})
    return rows


def insert_rows(client: Any, location: MilvusLocation, name: str, rows: list[dict[str, Any]]) -> None:
    for lo in range(0, len(rows), INSERT_BATCH):
        call(location, "insert", client.insert, name, rows[lo : lo + INSERT_BATCH])
    call(location, "flush", client.flush, name)


def id_filter(ids: Sequence[int]) -> str:
    return f"id in [{', '.join(str(int(i)) for i in ids)}]"


def switch_in(client: Any, location: MilvusLocation, temporary: str) -> None:
    """Put the complete ``temporary`` collection in place of ``location``'s, keeping the old one until it is."""
    name = location.collection
    aside = None
    if call(location, "has_collection", client.has_collection, name):
        aside = f"{name}{REPLACED}{secrets.token_hex(4)}"
        try:
            call(location, "rename_collection", client.rename_collection, name, aside)
        except BaseException:
            drop_quietly(client, temporary)
            raise
    try:
        call(location, "rename_collection", client.rename_collection, temporary, name)
    except BaseException:
        if aside is not None:
            try:
                client.rename_collection(aside, name)
            except Exception:  # noqa: BLE001 - the next command renames it back (see restore_switch)
                pass
        drop_quietly(client, temporary)
        raise
    if aside is not None:
        drop_quietly(client, aside)


def restore_switch(client: Any, location: MilvusLocation) -> None:
    """A switch a kill interrupted left ``NAME`` missing and the old collection aside: rename it back."""
    name = location.collection
    names = call(location, "list_collections", client.list_collections)
    aside = sorted(n for n in names if n.startswith(name + REPLACED))
    if aside and name not in names:
        call(location, "rename_collection", client.rename_collection, aside[-1], name)
        logger.warning("collection %s: a rebuild was interrupted; the previous collection is back", location.label)


def clean_leftovers(client: Any, location: MilvusLocation) -> None:
    """Before a write: restore an interrupted switch, then drop what killed builds and switches left."""
    restore_switch(client, location)
    prefixes = (location.collection + BUILDING, location.collection + REPLACED)
    for leftover in call(location, "list_collections", client.list_collections):
        if leftover.startswith(prefixes):
            call(location, "drop_collection", client.drop_collection, leftover)
            logger.info("collection %s: dropped %s, left by a build that did not finish", location.label, leftover)


def drop_quietly(client: Any, name: str) -> None:
    """Drop a half-built collection; a failure here must not hide the error that got us here."""
    try:
        if client.has_collection(name):
            client.drop_collection(name)
    except Exception:  # noqa: BLE001 - best effort while another exception propagates
        pass
