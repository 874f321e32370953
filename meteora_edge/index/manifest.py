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
from collections.abc import Callable
from typing import Any

from ..models.bm25 import BM25_ARRAYS, BM25_VOCAB
from ..errors import LocalIndexError

__all__ = [
    "INDEX_FORMAT",
    "INDEX_FORMAT_VERSION",
    "MANIFEST",
    "REQUIRED_FILES",
    "ANN_FILE",
    "generation_files",
    "GENERATION_NAME",
    "MAX_MANIFEST_BYTES",
    "parse_strict_json",
    "check_pointer",
    "check_manifest",
]

INDEX_FORMAT = "meteora-edge-index"
INDEX_FORMAT_VERSION = 2
MANIFEST = "manifest.json"
REQUIRED_FILES = ("vectors.npy", "chunks.jsonl", "chunk_offsets.npy", *(n for n, _ in BM25_ARRAYS), BM25_VOCAB)
#: The optional ANN structure (format 2 only), present exactly when the manifest has an ``ann`` entry.
ANN_FILE = "ann.faiss"
_ANN_FACTORY = re.compile(r"(IVF[1-9]\d{0,5}|HNSW[1-9]\d{0,2}),SQ8")
GENERATION_NAME = re.compile(r"gen-(\d{6,12})-[0-9a-f]{8}")
MAX_MANIFEST_BYTES = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")

Check = Callable[[Any, str], None]


class _Bad(Exception):
    """One schema violation: where in the document, and what was expected."""


def _integer(low: int, high: int) -> Check:
    def check(value: Any, at: str) -> None:
        if type(value) is not int or not low <= value <= high:
            raise _Bad(f"{at} must be an integer in [{low}, {high}], got {value!r:.60}")

    return check


def _text(max_len: int, pattern: re.Pattern[str] | None = None) -> Check:
    def check(value: Any, at: str) -> None:
        if not isinstance(value, str) or not 0 < len(value) <= max_len or (pattern and not pattern.fullmatch(value)):
            kind = f"a string matching {pattern.pattern}" if pattern else f"a string of 1..{max_len} characters"
            raise _Bad(f"{at} must be {kind}, got {value!r:.60}")

    return check


def _const(expected: Any) -> Check:
    def check(value: Any, at: str) -> None:
        if type(value) is not type(expected) or value != expected:
            raise _Bad(f"{at} must be {expected!r}, got {value!r:.60}")

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any, at: str) -> None:
        if value not in choices or not isinstance(value, str):
            raise _Bad(f"{at} must be one of {', '.join(choices)}, got {value!r:.60}")

    return check


def _object(fields: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    """An object with exactly ``fields`` and any of ``optional``."""
    optional = optional or {}

    def check(value: Any, at: str) -> None:
        if not isinstance(value, dict):
            raise _Bad(f"{at} must be an object, got {type(value).__name__}")
        missing = [k for k in fields if k not in value]
        extra = sorted(set(value) - set(fields) - set(optional))
        if missing:
            raise _Bad(f"{at} lacks {', '.join(map(repr, missing))}")
        if extra:
            raise _Bad(f"{at} has unexpected {', '.join(map(repr, extra[:3]))}")
        for key, field_check in fields.items():
            field_check(value[key], f"{at}.{key}")
        for key, field_check in optional.items():
            if key in value:
                field_check(value[key], f"{at}.{key}")

    return check


_FILE_ENTRY = _object({"sha256": _text(64, _SHA256), "size": _integer(0, 1 << 50)})
_STAMP = _text(64)
_POINTER = _object({
    "format": _const(INDEX_FORMAT),
    "format_version": _const(INDEX_FORMAT_VERSION),
    "generation": _text(40, GENERATION_NAME),
})
_V1_FIELDS: dict[str, Check] = {
    "format": _const(INDEX_FORMAT),
    "format_version": _const(1),
    "encoder": _object({"id": _text(512), "dimension": _integer(1, 1 << 16)}),
    "chunking": _object({"chunk_size": _integer(1, 1 << 24), "overlap": _integer(0, 1 << 24)}),
    "count": _integer(1, 1 << 40),
    "created": _STAMP,
    "updated": _STAMP,
    "files": _object({name: _FILE_ENTRY for name in REQUIRED_FILES}),
}
_MANIFESTS: dict[int, Check] = {
    1: _object(_V1_FIELDS),
    2: _object({
        **_V1_FIELDS,
        "format_version": _const(2),
        "last_write": _object({"op": _one_of("build", "add"), "chunks": _integer(1, 1 << 40)}),
        "files": _object({name: _FILE_ENTRY for name in REQUIRED_FILES}, {ANN_FILE: _FILE_ENTRY}),
    }, {
        "ann": _object({"kind": _one_of("ivf", "hnsw"), "factory": _text(32, _ANN_FACTORY),
                        "probe": _integer(1, 1 << 20)}),
    }),
}


def generation_files(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The files a (checked) manifest lists: :data:`REQUIRED_FILES`, and :data:`ANN_FILE` with an ANN."""
    return (*REQUIRED_FILES, ANN_FILE) if "ann" in manifest else REQUIRED_FILES


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
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0]
        raise LocalIndexError(f"{where} is corrupt ({reason}); rebuild the index") from None


def check_pointer(data: Any, where: str) -> str:
    """The generation a format-2 pointer names.

    Raises:
        LocalIndexError: the pointer does not match its schema.
    """
    try:
        _POINTER(data, "pointer")
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
            file list other than :func:`generation_files`, or overlap >= chunk_size.
    """
    try:
        _MANIFESTS[version](data, "manifest")
        chunking = data["chunking"]
        if chunking["overlap"] >= chunking["chunk_size"]:
            raise _Bad(f"manifest.chunking.overlap ({chunking['overlap']}) must be below chunk_size")
        if ("ann" in data) != (ANN_FILE in data["files"]):
            raise _Bad(f"manifest.files must list {ANN_FILE} exactly when manifest.ann is given")
        if "ann" in data and not data["ann"]["factory"].startswith(data["ann"]["kind"].upper()):
            raise _Bad(f"manifest.ann.factory {data['ann']['factory']!r} is not of kind {data['ann']['kind']!r}")
    except _Bad as exc:
        raise LocalIndexError(f"{where} is corrupt: {exc}; rebuild the index") from None
    return data
