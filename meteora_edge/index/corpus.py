"""Reading documents for a local index: text, markdown, JSON and JSONL files."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..documents import document_text
from ..errors import InputError
from ..fileio import read_json_or_jsonl, read_text_file

__all__ = ["SourceDocument", "read_documents", "path_label", "TEXT_SUFFIXES", "JSON_SUFFIXES"]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass(frozen=True)
class SourceDocument:
    """One document to index: a stable source id, its text and metadata."""

    source_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def path_label(path: str | os.PathLike[str]) -> str:
    """The path as valid UTF-8 text: bytes of a non-UTF-8 file name appear as ``\\xNN``.

    Example:
        >>> path_label(os.fsdecode(b"notes/caf\\xe9.txt"))
        'notes/caf\\\\xe9.txt'
    """
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _expand(paths: Sequence[str | os.PathLike[str]]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES + JSON_SUFFIXES)
            if not found:
                raise InputError(f"folder {path} holds no .txt, .md, .json or .jsonl files")
            yield from found
        elif path.exists():
            yield path
        else:
            raise InputError(f"file not found: {path}")


def read_documents(paths: Sequence[str | os.PathLike[str]]) -> list[SourceDocument]:
    """Read every document from files and folders (searched recursively).

    Text and markdown files are one document each (id = file path, see :func:`path_label`
    for names that are not UTF-8). JSON/JSONL files
    hold a list of documents (strings or objects with ``text``/``content``/
    ``page_content``, optional ``id``, ``title`` and ``metadata``), also under
    ``{"documents": [...]}`` or ``{"chunks": [...]}``.

    Raises:
        InputError: a path is missing, a file is malformed, or no document has text.
    """
    if not paths:
        raise InputError("no input given; pass files or folders to index")
    documents: list[SourceDocument] = []
    for path in _expand(paths):
        if path.suffix.lower() in JSON_SUFFIXES:
            documents += _json_documents(path)
        else:
            text = read_text_file(path)
            if text.strip():
                documents.append(SourceDocument(path_label(path), text, {"source": path_label(path)}))
    if not documents:
        raise InputError("the inputs hold no text to index")
    return documents


def _json_documents(path: Path) -> list[SourceDocument]:
    data = read_json_or_jsonl(path)
    if isinstance(data, dict):
        key = next((k for k in ("documents", "chunks") if k in data), None)
        items = data[key] if key else [data]  # a single document object
        if not isinstance(items, list):
            raise InputError(f"{path}: '{key}' must be a list")
    else:
        items = data if isinstance(data, list) else [data]
    out = []
    for position, item in enumerate(items):
        body = document_text(item, position=position)
        if not body.strip():
            continue
        meta: dict[str, Any] = {"source": path_label(path)}
        doc_id = f"{path_label(path)}#{position}"
        if isinstance(item, dict):
            if isinstance(item.get("id"), (str, int)):
                doc_id = str(item["id"])
            if isinstance(item.get("title"), str):
                meta["title"] = item["title"]
            if isinstance(item.get("metadata"), dict):
                meta.update(item["metadata"])
        out.append(SourceDocument(doc_id, body, meta))
    return out
