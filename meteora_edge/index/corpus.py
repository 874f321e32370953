"""Reading documents for a local index: every file :mod:`meteora_edge.readers` reads, and JSON.

Text in any encoding, HTML, PDF (one document per page, whose metadata names the page),
Word (.docx) and gzip-compressed files are one document each (JSON and JSON Lines files hold a
list). Folders are walked by :mod:`~meteora_edge.index.corpus_walk`, choosing files with a
:class:`~meteora_edge.index.file_choice.FileChoice`. A file that cannot be used — binary, of
another type, damaged, without text, JSON without a text field, a link leaving the folders — is
skipped with its reason (``on_skip``; the reason is a
:class:`~meteora_edge.index.skips.SkipReason` whose ``kind`` a summary counts), or, with
``strict=True``, is an error naming the file. A line of a JSON Lines file that is not valid
JSON, or holds no text, is skipped on its own as ``FILE:LINE``. The path ``-`` reads one
document from standard input, named ``<stdin>``, its type judged by its bytes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..documents import document_text
from ..errors import InputError, MissingExtraError
from ..fileio import RealPaths, is_stdin, parse_json_or_jsonl
from ..readers import JSON_SUFFIXES, TEXT_SUFFIXES, UnusableFileError, read_document_file
from .corpus_walk import SkipHandler, expand_paths, is_index_folder, path_label
from .file_choice import FileChoice
from .skips import BAD_LINE, EMPTY, MALFORMED, NEEDS_EXTRA, NO_TEXT_FIELD, UNREADABLE, SkipReason, plural

__all__ = ["SourceDocument", "read_documents", "read_changed", "is_index_folder", "path_label", "TEXT_SUFFIXES",
           "JSON_SUFFIXES", "SkipHandler", "FileChoice"]

logger = logging.getLogger(__name__)
LineHandler = Callable[[int, str], None]


@dataclass(frozen=True)
class SourceDocument:
    """One document to index: a stable source id, its text, metadata and the file it came from."""

    source_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    file: str | None = None


def _file_documents(path: Path | str, *, max_bytes: int | None = None,
                    on_line: LineHandler | None = None) -> list[SourceDocument]:
    """The documents of one file (``-``: standard input): one per PDF page, one per JSON record, else one.

    ``on_line(line, why)`` hears of JSON Lines lines left out; without it such a line is an error.
    """
    label = path_label(path)
    limit = {} if max_bytes is None else {"max_bytes": max_bytes}
    extracted = read_document_file(path, label, **limit)
    if extracted.kind == "json":
        return _json_documents(extracted.texts[0], label, on_line)
    meta: dict[str, Any] = {"source": label}
    if extracted.title:
        meta["title"] = extracted.title
    if extracted.kind == "pdf":
        return [SourceDocument(f"{label}#page={number}", text, {**meta, "page": number}, label)
                for number, text in enumerate(extracted.texts, start=1) if text.strip()]
    text = extracted.texts[0]
    return [SourceDocument(label, text, meta, label)] if text.strip() else []


def read_documents(
    paths: Sequence[str | os.PathLike[str]],
    *,
    strict: bool = False,
    on_skip: SkipHandler | None = None,
    follow_links: bool = False,
    choice: FileChoice | None = None,
) -> list[SourceDocument]:
    """Read every document from files and folders (searched recursively); see :func:`_read_documents`."""
    return _read_documents(paths, strict=strict, on_skip=on_skip, follow_links=follow_links, choice=choice)


def read_changed(
    paths: Sequence[str | os.PathLike[str]],
    *,
    unchanged: Callable[[str, tuple[int, int]], bool],
    strict: bool = False,
    on_skip: SkipHandler | None = None,
    follow_links: bool = False,
    choice: FileChoice | None = None,
) -> tuple[list[SourceDocument], set[str], dict[str, tuple[int, int]]]:
    """Read the files under ``paths`` that changed (for ``index sync``).

    Every file is listed and stat-ed first; ``unchanged(resolved path, (size, mtime_ns))``
    says which need not be read again. Nothing to read is not an error.

    Returns:
        ``(documents read, resolved paths of every file listed, (size, mtime_ns) of each file read)``.
    """
    listed: set[str] = set()
    states: dict[str, tuple[int, int]] = {}
    real = RealPaths()

    def wanted(path: Path | str, info: os.stat_result | None) -> bool:
        if is_stdin(path):
            return True
        key = real(path, link=None if info is None else False)  # as sources.source_key names it
        try:
            info = info or os.stat(path)
        except OSError:
            return True  # reading it reports why
        state = (info.st_size, info.st_mtime_ns)
        listed.add(key)
        if unchanged(key, state):
            return False
        states[key] = state
        return True

    documents = _read_documents(paths, strict=strict, on_skip=on_skip, follow_links=follow_links, wanted=wanted,
                                allow_empty=True, choice=choice)
    read = {real(d.file) for d in documents if d.file is not None}
    unreadable = {key for key in states if key not in read}
    return documents, listed - unreadable, states


def _read_documents(
    paths: Sequence[str | os.PathLike[str]],
    *,
    strict: bool = False,
    on_skip: SkipHandler | None = None,
    follow_links: bool = False,
    wanted: Callable[[Path | str, os.stat_result | None], bool] | None = None,
    allow_empty: bool = False,
    choice: FileChoice | None = None,
) -> list[SourceDocument]:
    """Read every document from files and folders (searched recursively).

    A file is one document (id = file path, see :func:`path_label` for names that are not
    UTF-8), a PDF one per page that holds text (id ``FILE#page=N``, metadata ``page``), a
    JSON/JSONL file a list of documents (strings or objects with ``text``/``content``/
    ``page_content``, optional ``id``, ``title`` and ``metadata``), also under
    ``{"documents": [...]}`` or ``{"chunks": [...]}``. HTML, PDF and Word files whose
    title is known carry it as metadata ``title``.

    Args:
        paths: files and folders.
        strict: fail on the first file (or JSON Lines line) that cannot be used instead of skipping it.
        on_skip: called with ``(path, reason)`` for every skipped file (default: a logged warning);
            ``reason`` is a :class:`~meteora_edge.index.skips.SkipReason`. A JSON Lines line left
            out is reported with the path ``FILE:LINE`` and the kind ``bad line``.
        follow_links: inside folders, also read symlinked files that point outside the folders
            given (by default they are skipped with their reason; links to folders are never
            followed). A file named in ``paths`` is read wherever it points.
        choice: which files inside folders are read (patterns, ignore files, size cap).

    Returns:
        The documents, in path order; each knows its ``file``.

    Raises:
        InputError: a named path is missing; with ``strict``, a file that cannot be used; or
            nothing readable at all (naming the first skipped file and why).
    """
    if not paths:
        raise InputError("no input given; pass files or folders to index")
    skipped: list[tuple[Path, str]] = []
    max_bytes = None if choice is None else choice.max_file_bytes

    def skip(path: Path | str, reason: str) -> None:
        if not is_stdin(path):
            path = Path(path)  # a walked file is a string until it is reported
        label = path_label(path)
        reason = SkipReason(reason.replace(str(path), label),  # a non-UTF-8 file name stays printable
                            getattr(reason, "kind", MALFORMED))
        if reason.startswith(label + " "):
            reason = SkipReason(reason[len(label) + 1:].removeprefix("is "), reason.kind)  # "F is binary" -> "binary"
        elif reason.startswith(label + ": "):
            reason = SkipReason(reason[len(label) + 2:], reason.kind)
        if strict:
            raise InputError(f"{label}: {reason} (--strict)")
        if reason.kind != BAD_LINE:
            skipped.append((path, reason))
        if on_skip is not None:
            on_skip(path, reason)
        else:
            logger.warning("skipped %s: %s", label, reason)

    documents: list[SourceDocument] = []
    for path, info in expand_paths(paths, skip, follow_links, choice):
        if wanted is not None and not wanted(path, info):
            continue
        if not is_stdin(path):
            path = Path(path)  # a walked file is a string until it is read
        label = path_label(path)

        def bad_line(where: str, why: str, label: str = label) -> None:
            mark = f":{where[5:]}" if where.startswith("line ") else f"#{where[9:]}"
            skip(Path(label + mark), SkipReason(why, BAD_LINE))

        try:
            found = _file_documents(path, max_bytes=max_bytes, on_line=bad_line)
        except UnusableFileError as exc:
            vanished = not is_stdin(path) and not os.path.lexists(path)
            skip(path, SkipReason("it vanished before it could be read", UNREADABLE) if vanished
                 else SkipReason(str(exc), exc.kind))
            continue
        except MissingExtraError as exc:
            skip(path, SkipReason(f"{exc}", NEEDS_EXTRA))
            continue
        except InputError as exc:
            skip(path, SkipReason(str(exc), MALFORMED))
            continue
        if found:
            documents += found
        else:
            skip(path, SkipReason("it holds no text", EMPTY))
    if not documents and not allow_empty:
        first = (f"; skipped {plural(len(skipped), 'file')}, first {path_label(skipped[0][0])}: {skipped[0][1]}"
                 if skipped else "")
        raise InputError(f"the inputs hold no text to index{first}")
    return documents


def _json_documents(text: str, label: str, on_line: LineHandler | None) -> list[SourceDocument]:
    """The documents of a JSON or JSON Lines file; with ``on_line``, a bad line or record is left out and
    reported as ``("line N" or "position N", why)`` unless none is usable."""
    data = parse_json_or_jsonl(text, label, on_bad_line=None if on_line is None else
                               lambda number, why: on_line(f"line {number}", why.removeprefix("is ")))
    if isinstance(data, dict):
        key = next((k for k in ("documents", "chunks") if k in data), None)
        items = data[key] if key else [data]  # a single document object
        if not isinstance(items, list):
            raise InputError(f"{label}: '{key}' must be a list")
    else:
        items = data if isinstance(data, list) else [data]
    numbers = getattr(data, "numbers", None)
    out, problems = [], []
    for position, item in enumerate(items):
        try:
            body = document_text(item, position=None if numbers else position)
        except InputError as exc:
            where = f"line {numbers[position]}" if numbers else f"position {position}"
            if on_line is None or len(items) == 1:
                raise UnusableFileError(f"{label}: {exc}", NO_TEXT_FIELD) from None
            problems.append((where, str(exc)))
            continue
        if not body.strip():
            continue
        meta: dict[str, Any] = {"source": label}
        doc_id = f"{label}#{position}"
        if isinstance(item, dict):
            if isinstance(item.get("id"), (str, int)):
                doc_id = str(item["id"])
            if isinstance(item.get("title"), str):
                meta["title"] = item["title"]
            if isinstance(item.get("metadata"), dict):
                meta.update(item["metadata"])
        out.append(SourceDocument(doc_id, body, meta, label))
    if problems and not out:
        raise UnusableFileError(f"{label}: no record holds a text ({problems[0][0]}: {problems[0][1]})", NO_TEXT_FIELD)
    for where, why in problems:
        on_line(where, why)  # type: ignore[misc]
    return out
