"""The index's on-disk schema: the pointer, the generation manifest and the files they list.

Both JSON documents are checked key by key against the tables below (exact key sets,
exact types, bounded numbers) and the file list must be exactly :data:`REQUIRED_FILES`
(plus :data:`ANN_FILE` exactly when the manifest has an ``ann`` entry, see
:mod:`meteora_edge.index.ann_index`), so a manifest that leaves a file out of its hashes, adds a parameter or swaps an object
for a string is refused even when its hashes were recomputed. JSON is parsed strictly:
no NaN/Infinity, no duplicate keys, at most :data:`MAX_MANIFEST_BYTES`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import Any

from ..models.bm25 import BM25_ARRAYS, BM25_VOCAB
from .chunking import BOUNDARIES
from ..models.sparse_index import SPARSE_ARRAYS
from ..errors import LocalIndexError

__all__ = [
    "utc_now",
    "INDEX_FORMAT",
    "INDEX_FORMAT_VERSION",
    "MANIFEST",
    "REQUIRED_FILES",
    "ANN_FILE",
    "SOURCES_FILE",
    "DELTA_FILES",
    "DELETED_FILE",
    "SPARSE_FILES",
    "generation_files",
    "GENERATION_NAME",
    "MAX_MANIFEST_BYTES",
    "parse_strict_json",
    "check_pointer",
    "check_manifest",
]

INDEX_FORMAT = "meteora-edge-index"
INDEX_FORMAT_VERSION = 3
MANIFEST = "manifest.json"
REQUIRED_FILES = ("vectors.npy", "chunks.jsonl", "chunk_offsets.npy", *(n for n, _ in BM25_ARRAYS), BM25_VOCAB)
#: The optional ANN structure (format 2 only), present exactly when the manifest has an ``ann`` entry.
ANN_FILE = "ann.faiss"
#: Format 3: the source table (see :mod:`meteora_edge.index.sources`), in every generation.
SOURCES_FILE = "sources.json"
#: Format 3: the chunks written since the base files were (see :mod:`meteora_edge.index.segments`).
DELTA_FILES = ("delta_vectors.npy", "delta_chunks.jsonl", "delta_chunk_offsets.npy",
               *(f"delta_{n}" for n, _ in BM25_ARRAYS), f"delta_{BM25_VOCAB}")
#: Format 3: the sorted ids of removed chunks, until a compaction drops them.
DELETED_FILE = "deleted.npy"
#: Format 3: learned-sparse postings over every chunk id, present exactly when the manifest has a ``lexical`` entry.
SPARSE_FILES = tuple(n for n, _ in SPARSE_ARRAYS)
_ANN_FACTORY = re.compile(r"(IVF[1-9]\d{0,5}|HNSW[1-9]\d{0,2}),SQ8")
GENERATION_NAME = re.compile(r"gen-(\d{6,12})-[0-9a-f]{8}")
MAX_MANIFEST_BYTES = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


class _Bad(Exception):
    """One schema violation: where in the document, and what was expected."""


# The schema is data: each node below checks one value when asked (at load time, not import time).

@dataclass(frozen=True)
class _Integer:
    low: int
    high: int

    def check(self, value: Any, at: str) -> None:
        if type(value) is not int or not self.low <= value <= self.high:
            raise _Bad(f"{at} must be an integer in [{self.low}, {self.high}], got {value!r:.60}")


@dataclass(frozen=True)
class _Text:
    max_len: int
    pattern: re.Pattern[str] | None = None

    def check(self, value: Any, at: str) -> None:
        pattern = self.pattern
        if not isinstance(value, str) or not 0 < len(value) <= self.max_len or (pattern and not pattern.fullmatch(value)):
            kind = f"a string matching {pattern.pattern}" if pattern else f"a string of 1..{self.max_len} characters"
            raise _Bad(f"{at} must be {kind}, got {value!r:.60}")


@dataclass(frozen=True)
class _Const:
    expected: Any

    def check(self, value: Any, at: str) -> None:
        if type(value) is not type(self.expected) or value != self.expected:
            raise _Bad(f"{at} must be {self.expected!r}, got {value!r:.60}")


@dataclass(frozen=True)
class _OneOf:
    choices: tuple[str, ...]

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, str) or value not in self.choices:
            raise _Bad(f"{at} must be one of {', '.join(self.choices)}, got {value!r:.60}")


@dataclass(frozen=True)
class _Object:
    """An object with exactly ``fields`` and any of ``optional``."""

    fields: dict[str, Any]
    optional: dict[str, Any] = field(default_factory=dict)

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict):
            raise _Bad(f"{at} must be an object, got {type(value).__name__}")
        missing = [k for k in self.fields if k not in value]
        extra = sorted(set(value) - set(self.fields) - set(self.optional))
        if missing:
            raise _Bad(f"{at} lacks {', '.join(map(repr, missing))}")
        if extra:
            raise _Bad(f"{at} has unexpected {', '.join(map(repr, extra[:3]))}")
        for key, node in {**self.fields, **self.optional}.items():
            if key in value:
                node.check(value[key], f"{at}.{key}")


@dataclass(frozen=True)
class _Record:
    """A small object of strings and integers (an analyser record; which ones are known is checked on load)."""

    max_keys: int = 16

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict) or not 0 < len(value) <= self.max_keys:
            raise _Bad(f"{at} must be an object of 1..{self.max_keys} keys, got {value!r:.60}")
        for key, item in value.items():
            if not (isinstance(item, str) and 0 < len(item) <= 64) and type(item) is not int:
                raise _Bad(f"{at}.{key} must be a short string or an integer, got {item!r:.60}")


_FILE_ENTRY = _Object({"sha256": _Text(64, _SHA256), "size": _Integer(0, 1 << 50)})
_STAMP = _Text(64)
_POINTERS = {version: _Object({
    "format": _Const(INDEX_FORMAT),
    "format_version": _Const(version),
    "generation": _Text(40, GENERATION_NAME),
}) for version in (2, 3)}
_V1_FIELDS: dict[str, Any] = {
    "format": _Const(INDEX_FORMAT),
    "format_version": _Const(1),
    "encoder": _Object({"id": _Text(512), "dimension": _Integer(1, 1 << 16)},
                       {"bundle": _Object({"path": _Text(4096), "manifest_sha256": _Text(64, _SHA256)})}),
    "chunking": _Object({"chunk_size": _Integer(1, 1 << 24), "overlap": _Integer(0, 1 << 24)},
                        {"boundaries": _OneOf(BOUNDARIES)}),
    "count": _Integer(1, 1 << 40),
    "created": _STAMP,
    "updated": _STAMP,
    "files": _Object({name: _FILE_ENTRY for name in REQUIRED_FILES}),
}
_MANIFESTS: dict[int, _Object] = {
    1: _Object(_V1_FIELDS),
    2: _Object({
        **_V1_FIELDS,
        "format_version": _Const(2),
        "last_write": _Object({"op": _OneOf(("build", "add")), "chunks": _Integer(1, 1 << 40)}),
        "files": _Object({name: _FILE_ENTRY for name in REQUIRED_FILES}, {ANN_FILE: _FILE_ENTRY}),
    }, {
        "ann": _Object({"kind": _OneOf(("ivf", "hnsw")), "factory": _Text(32, _ANN_FACTORY),
                        "probe": _Integer(1, 1 << 20)}),
        # the lexical analyser of the BM25 terms (absent: unicode-words, the one before analysers were recorded)
        "analyzer": _Record(),
    }),
}
_V3_OPS = ("build", "add", "sync", "remove", "compact")
_MANIFESTS[3] = _Object({
    **_MANIFESTS[2].fields,
    "format_version": _Const(3),
    "last_write": _Object({"op": _OneOf(_V3_OPS), "chunks": _Integer(0, 1 << 40)}),
    # base + delta == count; deleted counts the ids in deleted.npy (present exactly when it is > 0)
    "segments": _Object({"base": _Integer(1, 1 << 40), "delta": _Integer(0, 1 << 40),
                         "deleted": _Integer(0, 1 << 40)}),
    "files": _Object({name: _FILE_ENTRY for name in (*REQUIRED_FILES, SOURCES_FILE)},
                     {ANN_FILE: _FILE_ENTRY, DELETED_FILE: _FILE_ENTRY, **{n: _FILE_ENTRY for n in DELTA_FILES},
                      **{n: _FILE_ENTRY for n in SPARSE_FILES}}),
}, {
    **_MANIFESTS[2].optional,
    # learned-sparse postings beside BM25 (absent: BM25 is the index's lexical scorer), and the model that made them
    "lexical": _Object({"scorer": _OneOf(("sparse",)), "model": _Text(512)}),
})


def generation_files(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The files a (checked) manifest lists: :data:`REQUIRED_FILES`, and :data:`ANN_FILE` with an ANN;
    format 3 adds :data:`SOURCES_FILE`, :data:`DELTA_FILES` with a delta and :data:`DELETED_FILE` with deletions."""
    names = (*REQUIRED_FILES, ANN_FILE) if "ann" in manifest else REQUIRED_FILES
    segments = manifest.get("segments")
    if segments is None:
        return names
    return (*names, SOURCES_FILE, *(DELTA_FILES if segments["delta"] else ()),
            *((DELETED_FILE,) if segments["deleted"] else ()), *(SPARSE_FILES if "lexical" in manifest else ()))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a key appears twice")
    return out


def parse_strict_json(raw: bytes, where: str, *, max_bytes: int | None = MAX_MANIFEST_BYTES) -> Any:
    """Parse a JSON document the index wrote (UTF-8, no NaN, no repeated keys).

    Args:
        raw: the file's bytes.
        where: names the file in error messages.
        max_bytes: refuse larger documents (``None``: no limit).

    Raises:
        LocalIndexError: too large, not UTF-8, not JSON, or nested too deeply.
    """
    if max_bytes is not None and len(raw) > max_bytes:
        raise LocalIndexError(f"{where} is {len(raw)} bytes, more than an index writes; rebuild the index")
    try:
        return json.loads(raw.decode(), parse_constant=_refuse_constant, object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0]
        raise LocalIndexError(f"{where} is corrupt ({reason}); rebuild the index") from None


def _timestamp(value: str, at: str) -> datetime:
    """An ISO 8601 time with its UTC offset, as the index writes them."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise _Bad(f"{at} must be an ISO 8601 time with a UTC offset, got {value!r:.60}")
    return moment


def check_pointer(data: Any, where: str) -> str:
    """The generation a format-2 or format-3 pointer names.

    Raises:
        LocalIndexError: the pointer does not match its schema.
    """
    try:
        version = data.get("format_version") if isinstance(data, dict) else None
        _POINTERS[version if version in _POINTERS else INDEX_FORMAT_VERSION].check(data, "pointer")
    except _Bad as exc:
        raise LocalIndexError(f"{where} is corrupt: {exc}; rebuild the index") from None
    return str(data["generation"])


def check_manifest(data: Any, where: str, *, version: int) -> dict[str, Any]:
    """Check a generation manifest (format 2) or a whole-folder manifest (format 1).

    Args:
        data: the parsed manifest.
        where: names the file in error messages.
        version: the format version the pointer (or the file itself) declared.

    Returns:
        ``data``, now known to match the schema.

    Raises:
        LocalIndexError: a missing or extra key, a wrong type, a value out of range, a
            file list other than :func:`generation_files`, overlap >= chunk_size, a time that is
            not ISO 8601 with an offset, ``updated`` before ``created``, or a last write of more
            chunks than the count (a build: other than the count).
    """
    try:
        _MANIFESTS[version].check(data, "manifest")
        chunking = data["chunking"]
        if chunking["overlap"] >= chunking["chunk_size"]:
            raise _Bad(f"manifest.chunking.overlap ({chunking['overlap']}) must be below chunk_size")
        created, updated = (_timestamp(data[key], f"manifest.{key}") for key in ("created", "updated"))
        if updated < created:
            raise _Bad(f"manifest.updated ({data['updated']}) is before manifest.created ({data['created']})")
        last = data.get("last_write")
        if last is not None and last["chunks"] > data["count"]:
            raise _Bad(f"manifest.last_write.chunks ({last['chunks']}) is more than manifest.count ({data['count']})")
        if last is not None and last["op"] == "build" and last["chunks"] != data["count"]:
            raise _Bad(f"manifest.last_write is a build of {last['chunks']} chunks, but manifest.count is {data['count']}")
        segments = data.get("segments")
        if segments is not None:
            if segments["base"] + segments["delta"] != data["count"]:
                raise _Bad(f"manifest.segments ({segments['base']} + {segments['delta']}) do not add up to "
                           f"manifest.count ({data['count']})")
            if segments["deleted"] >= data["count"]:
                raise _Bad(f"manifest.segments.deleted ({segments['deleted']}) must be below manifest.count")
            if set(data["files"]) != set(generation_files(data)):
                raise _Bad("manifest.files must list the delta files exactly with a delta, and deleted.npy "
                           "exactly with deletions")
        if ("ann" in data) != (ANN_FILE in data["files"]):
            raise _Bad(f"manifest.files must list {ANN_FILE} exactly when manifest.ann is given")
        if "ann" in data and not data["ann"]["factory"].startswith(data["ann"]["kind"].upper()):
            raise _Bad(f"manifest.ann.factory {data['ann']['factory']!r} is not of kind {data['ann']['kind']!r}")
    except _Bad as exc:
        raise LocalIndexError(f"{where} is corrupt: {exc}; rebuild the index") from None
    return data


def utc_now() -> str:
    """The current time as a manifest records it (UTC, ISO 8601, whole seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
