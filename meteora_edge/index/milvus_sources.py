"""What a Milvus collection (format 2) keeps about its sources, and the journal of a write by source.

Every row carries its source, as the local index's source table does (see
:mod:`meteora_edge.index.sources`)::

    source_key        VARCHAR  the file's resolved path (``id:…``/``stdin:…`` without a file)
    source_size       INT64    its size when it was read            (nullable: unknown)
    source_mtime_ns   INT64    its modification time when it was read (nullable)
    source_sha256     VARCHAR  the hash of what was read from it     (nullable)

The table is read back from the rows (:func:`read_table`); rows without these fields (a
collection written by format 1, migrated) are grouped by their file as
:func:`~meteora_edge.index.sources.table_from_records` does, with their size, time and hash
unknown, so the next ``index sync`` reads those files again.

A write by source (add, sync, remove) inserts the new rows first and deletes the old ones after.
The collection property ``meteora_edge.pending_add`` journals it (:class:`Pending`): ``insert``
with the first new id while rows go in (a write killed then is rolled back: ids from there on are
deleted), then ``delete`` with the id ranges to remove, set in the same call that moves
``meteora_edge.next_id`` past the new rows (a write killed then is rolled forward). Either way the
next write leaves the old state or the new one. A bare number in that property is the first id
of a format-1 add (rolled back).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CollectionError
from .content_hashes import record_file
from .corpus import SourceDocument
from .sources import SourceEntry, group_by_source, resolve_keys, source_key
from .updates import SourceAddition, addition

__all__ = ["SOURCE_FIELDS", "Pending", "add_source_fields", "source_columns", "document_columns", "per_chunk",
           "read_table", "id_ranges", "range_filters"]

SOURCE_FIELDS = ("source_key", "source_size", "source_mtime_ns", "source_sha256")
#: fields read to rebuild the table (a row without a file also needs its ``source`` and ``metadata``)
TABLE_FIELDS = ["id", "file", *SOURCE_FIELDS]
_FILTER_RANGES = 256  # id ranges per delete expression


def add_source_fields(schema: Any, data_types: Any, text_bytes: int) -> None:
    """Add the four source fields to a collection schema (nullable: unknown for migrated rows)."""
    schema.add_field("source_key", data_types.VARCHAR, max_length=text_bytes, nullable=True)
    schema.add_field("source_size", data_types.INT64, nullable=True)
    schema.add_field("source_mtime_ns", data_types.INT64, nullable=True)
    schema.add_field("source_sha256", data_types.VARCHAR, max_length=64, nullable=True)


def _columns(item: SourceAddition) -> dict[str, Any]:
    return {"source_key": item.key, "source_size": item.size, "source_mtime_ns": item.mtime_ns,
            "source_sha256": item.sha256}


def source_columns(additions: Sequence[SourceAddition]) -> list[dict[str, Any]]:
    """The source fields of each document of ``additions``, in order."""
    return [_columns(item) for item in additions for _ in item.documents]


def document_columns(documents: Sequence[SourceDocument]) -> list[dict[str, Any]]:
    """The source fields of each of ``documents`` (in their order), each source stat-ed and hashed once."""
    additions = {key: addition(key, docs) for key, docs in group_by_source(documents).items()}
    return [_columns(additions[source_key(document)]) for document in documents]


def per_chunk(columns: Sequence[dict[str, Any]], counts: Sequence[int]) -> list[dict[str, Any]]:
    """Per-document fields repeated for each chunk the document made (``counts``, in order)."""
    return [column for column, n in zip(columns, counts) for _ in range(n)]


@dataclass
class _Group:
    label: str
    ids: list[int]
    states: set[tuple[Any, Any, Any]]


def read_table(rows: Iterable[dict[str, Any]]) -> dict[str, SourceEntry]:
    """The source table of a collection from its rows (any order; :data:`TABLE_FIELDS`, and ``source`` and
    ``metadata`` for a row without a file): key → entry whose ``documents`` are the runs of consecutive
    chunk ids (their text hashes are not stored: ``None``)."""
    groups: dict[str, _Group] = {}
    for row in rows:
        key = row.get("source_key")
        label = str(row.get("file") or record_file(row))
        if not key:  # a row of a migrated format-1 collection: keyed by its file, as table_from_records does
            key = source_key(SourceDocument(str(row.get("source", "")), "", {}, label))
        group = groups.setdefault(key, _Group(label, [], set()))
        group.ids.append(int(row["id"]))
        group.states.add((row.get("source_size"), row.get("source_mtime_ns"), row.get("source_sha256")))
    table = {}
    for key, group in groups.items():
        size, mtime, sha = next(iter(group.states)) if len(group.states) == 1 else (None, None, None)
        runs = tuple((None, lo, hi) for lo, hi in id_ranges(group.ids))
        table[key] = SourceEntry(key, group.label, size, mtime, sha, runs)
    return resolve_keys(table)


def id_ranges(ids: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ids as half-open runs ``(lo, hi)``."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(ids)):
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def range_filters(ranges: Sequence[tuple[int, int]]) -> Iterator[str]:
    """Milvus filter expressions covering ``ranges``, a bounded number of ranges each."""
    for lo in range(0, len(ranges), _FILTER_RANGES):
        yield " or ".join(f"(id >= {a} and id < {b})" for a, b in ranges[lo : lo + _FILTER_RANGES])


@dataclass(frozen=True)
class Pending:
    """The journal of a write by source: its phase, the first id it inserts, the id ranges it deletes."""

    phase: str
    first: int
    delete: tuple[tuple[int, int], ...] = ()

    def encode(self) -> str:
        return json.dumps({"phase": self.phase, "first": self.first, "delete": [list(r) for r in self.delete]},
                          separators=(",", ":"))

    @classmethod
    def decode(cls, value: str, where: str) -> Pending:
        """Parse the property (a bare number: a format-1 add's first id).

        Raises:
            CollectionError: not a journal this package writes.
        """
        if value.isdigit():
            return cls("insert", int(value))
        bad = CollectionError(f"collection {where} has an unreadable meteora_edge.pending_add ({value[:60]!r}); "
                              "rebuild it")
        try:
            data = json.loads(value)
            pending = cls(str(data["phase"]), int(data["first"]),
                          tuple((int(lo), int(hi)) for lo, hi in data.get("delete", ())))
        except (ValueError, TypeError, KeyError):
            raise bad from None
        if pending.phase not in ("insert", "delete") or pending.first < 0:
            raise bad
        return pending
