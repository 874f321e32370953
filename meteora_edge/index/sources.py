"""The source table of a local index (format 3): which chunks each source file holds.

A *source* is a file that was indexed, named by its resolved path (``os.path.realpath``: a
folder reached through a link, macOS's ``/tmp`` → ``/private/tmp`` or a symlinked home name the
same source as the path they point to, so a source is never held twice); a document given without
a file, by its id; standard input, by the hash of its text, so each piped text stays. For each
source the table keeps its size and modification time (so ``index sync`` reads only files
whose size or time changed), the sha256 of what was read from it (so a touched but unchanged
file is left alone), and per document the sha256 of its text and the range of chunk ids its
chunks hold (so a renamed or copied file re-uses its vectors instead of being embedded again).

The table is ``sources.json`` in every format-3 generation; indexes written before it existed
get one built from their chunk records on their first write (see :func:`table_from_records`).
A table read back has its keys resolved again (:func:`resolve_keys`): an index written with
unresolved paths, or whose folders have since become links, keeps matching its files.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..errors import LocalIndexError
from ..fileio import STDIN_LABEL, RealPaths
from .corpus import SourceDocument
from .manifest import parse_strict_json

__all__ = ["SourceEntry", "source_key", "text_hash", "content_hash", "hash_document", "group_by_source", "file_state",
           "encode_table", "encode_row", "write_table", "decode_table", "table_from_records", "is_under", "matching_sources",
           "resolve_keys", "one_file_per_source"]

_TABLE_FORMAT = "meteora-edge-sources"


@dataclass(frozen=True)
class SourceEntry:
    """One tracked source.

    Attributes:
        key: the resolved absolute path of the file (``id:SOURCE_ID`` for a document without a file,
            ``stdin:SHA256`` for standard input).
        label: the file as the chunk records name it (the path as given).
        size, mtime_ns: the file's size and modification time when it was read (``None`` when unknown).
        sha256: the hash of the documents read from it (``None`` for an index written before
            sources were tracked: the next sync reads the file again).
        documents: per document, ``(sha256 of its text, first chunk id, end chunk id)``.
    """

    key: str
    label: str
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    documents: tuple[tuple[str | None, int, int], ...]

    def chunk_ids(self) -> list[int]:
        return [i for _, lo, hi in self.documents for i in range(lo, hi)]

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "size": self.size, "mtime_ns": self.mtime_ns,
                "sha256": self.sha256, "documents": [list(d) for d in self.documents]}

    @cached_property
    def row(self) -> bytes:
        """This entry as its row of ``sources.json``, encoded once: an update carries the entries it did
        not change over as the same objects, so it encodes only the ones it changed."""
        return _json(self.to_json())


def text_hash(text: str) -> str:
    """The sha256 of a document's text (a lone surrogate is hashed too; the writer refuses it later)."""
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()


def source_key(document: SourceDocument, real: RealPaths | None = None) -> str:
    """The key that tracks ``document``'s source (see :class:`SourceEntry`); ``real`` resolves paths
    (one :class:`~meteora_edge.fileio.RealPaths` for many documents resolves each folder once)."""
    if document.file == STDIN_LABEL:
        return f"stdin:{text_hash(document.text)}"
    if document.file is None:
        return f"id:{document.source_id}"
    return real(document.file) if real is not None else os.path.realpath(document.file)


def one_file_per_source(documents: Iterable[SourceDocument]) -> list[SourceDocument]:
    """``documents`` less those of a second file that resolves to a source already read (a link to a
    file beside it, the same folder given twice through a link): each source is read once."""
    first: dict[str, str | None] = {}
    out = []
    real = RealPaths()
    for document in documents:
        if first.setdefault(source_key(document, real), document.file) == document.file:
            out.append(document)
    return out


def resolve_keys(table: dict[str, SourceEntry]) -> dict[str, SourceEntry]:
    """``table`` with each path key resolved as :func:`source_key` resolves it now (each folder resolved
    once). Entries whose keys resolve to one path are merged into one whose size, time and hash are
    unknown, so the next ``index sync`` of that file reads it again and replaces all of their chunks."""
    resolve = RealPaths()
    out: dict[str, SourceEntry] = {}
    for key, entry in table.items():
        real = resolve(key) if os.path.isabs(key) else key
        if real != key:
            entry = SourceEntry(real, entry.label, entry.size, entry.mtime_ns, entry.sha256, entry.documents)
        held = out.get(real)
        if held is not None:
            entry = SourceEntry(real, held.label, None, None, None,
                                tuple(sorted(held.documents + entry.documents, key=lambda d: d[1])))
        out[real] = entry
    return out


def content_hash(documents: Sequence[SourceDocument]) -> str:
    """The sha256 of everything read from one source: each document's id, text and metadata."""
    digest = hashlib.sha256()
    for document in documents:
        hash_document(digest, document)
    return digest.hexdigest()


def hash_document(digest: Any, document: SourceDocument) -> None:
    """Feed one document to a :func:`content_hash` digest."""
    item = [document.source_id, document.text, document.metadata]
    digest.update(json.dumps(item, ensure_ascii=False, sort_keys=True, default=str).encode(errors="surrogatepass"))
    digest.update(b"\n")


def group_by_source(documents: Iterable[SourceDocument]) -> dict[str, list[SourceDocument]]:
    """The documents by source key, sources and documents in their order."""
    groups: dict[str, list[SourceDocument]] = {}
    real = RealPaths()
    for document in documents:
        groups.setdefault(source_key(document, real), []).append(document)
    return groups


def file_state(key: str) -> tuple[int | None, int | None]:
    """``(size, mtime_ns)`` of the file a key names, ``(None, None)`` for other keys or a file that is gone."""
    if not os.path.isabs(key):
        return None, None
    try:
        info = os.stat(key)
    except OSError:
        return None, None
    return info.st_size, info.st_mtime_ns


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def encode_table(entries: Iterable[SourceEntry]) -> bytes:
    """``sources.json``: the entries sorted by key (the bytes of one ``json.dumps`` of the whole table)."""
    out = io.BytesIO()
    write_table((entry.row for entry in sorted(entries, key=lambda e: e.key)), out)
    return out.getvalue()


def encode_row(entry: SourceEntry) -> bytes:
    """One entry of ``sources.json``, as :func:`write_table` takes it (encoded once per entry)."""
    return entry.row


def write_table(rows: Iterable[bytes], out: Any) -> None:
    """Write ``sources.json`` to ``out`` (anything with ``.write``) from its encoded rows, sorted by key."""
    out.write(b'{"format":' + _json(_TABLE_FORMAT) + b',"sources":[')
    for i, row in enumerate(rows):
        out.write(b"," + row if i else row)
    out.write(b"]}\n")


def _optional_int(value: Any) -> bool:
    return value is None or (type(value) is int and value >= 0)


def decode_table(raw: bytes, where: str, *, count: int) -> dict[str, SourceEntry]:
    """Parse and check ``sources.json`` (chunk ranges inside ``0..count``, no chunk in two sources).

    Raises:
        LocalIndexError: not the table, a field of the wrong type, or ranges that overlap or leave the index.
    """
    try:
        data = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError):
        parse_strict_json(raw, where, max_bytes=None)  # raises its one-line message
        raise LocalIndexError(f"{where} is corrupt; rebuild the index") from None
    bad = LocalIndexError(f"{where} is corrupt (not a source table of this index); rebuild the index")
    if not isinstance(data, dict) or data.get("format") != _TABLE_FORMAT or not isinstance(data.get("sources"), list):
        raise bad
    table: dict[str, SourceEntry] = {}
    seen = 0
    for row in data["sources"]:
        try:
            documents = tuple((h, lo, hi) for h, lo, hi in row["documents"])
            entry = SourceEntry(row["key"], row["label"], row["size"], row["mtime_ns"], row["sha256"], documents)
        except (KeyError, TypeError, ValueError):
            raise bad from None
        if (not isinstance(entry.key, str) or not isinstance(entry.label, str) or entry.key in table
                or not _optional_int(entry.size) or not _optional_int(entry.mtime_ns)
                or not (entry.sha256 is None or isinstance(entry.sha256, str))
                or any(not (h is None or isinstance(h, str)) or type(lo) is not int or type(hi) is not int
                       or not 0 <= lo < hi <= count for h, lo, hi in documents)):
            raise bad
        seen += sum(hi - lo for _, lo, hi in documents)
        table[entry.key] = entry
    if seen > count:
        raise bad
    return resolve_keys(table)


def table_from_records(records: Iterable[dict[str, Any]]) -> dict[str, SourceEntry]:
    """The table of an index written before sources were tracked, from its records in id order.

    A record's ``file`` (else its metadata's ``source``, else its document id) names the source,
    taken relative to the current folder; sizes, times and hashes are unknown, so the next
    ``index sync`` reads each file again (and replaces its chunks if it changed).
    """
    from .content_hashes import record_file

    ranges: dict[str, tuple[str, list[list[Any]]]] = {}
    for record in records:
        label = str(record_file(record))
        key = source_key(SourceDocument(str(record["source"]), "", {}, label))
        _, documents = ranges.setdefault(key, (label, []))
        last = documents[-1] if documents else None
        if last is not None and last[3] == record["source"] and last[2] == record["id"]:
            last[2] += 1
        else:
            documents.append([None, record["id"], record["id"] + 1, record["source"]])
    return resolve_keys({key: SourceEntry(key, label, None, None, None, tuple((h, lo, hi) for h, lo, hi, _ in documents))
                         for key, (label, documents) in ranges.items()})


def is_under(key: str, root: str) -> bool:
    """Whether the path ``key`` is ``root`` or inside it."""
    return key == root or key.startswith(root.rstrip(os.sep) + os.sep)


def matching_sources(table: dict[str, SourceEntry], name: str) -> set[str]:
    """The keys ``name`` names: a key, a record label, a path (absolute or relative, through links or not),
    or a folder holding sources."""
    paths = {os.path.abspath(name), os.path.realpath(name)}
    return {key for key, entry in table.items()
            if key == name or entry.label == name or any(is_under(key, path) for path in paths)}
