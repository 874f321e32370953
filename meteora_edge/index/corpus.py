"""Reading documents for a local index: text, markdown, JSON and JSONL files.

A file that cannot be used — a PDF, an unsupported type found in a folder, bytes that are
not UTF-8, JSON that is malformed or holds no text field, an empty file — is skipped with
its reason (``on_skip``), or, with ``strict=True``, is an error naming the file. So is, inside a
folder, a FIFO, socket or device, a link to a folder, a broken link, a link to a file outside
the folders given (unless ``follow_links``) and a file that vanishes while it is read. Hidden files
and folders (``.git``, ``.DS_Store``) inside a folder are passed over silently. Folders are
walked with a stack, so any depth works. The path ``-`` reads one text document from standard
input, named ``<stdin>``.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..documents import document_text
from ..errors import InputError
from ..fileio import STDIN, STDIN_LABEL, is_stdin, read_json_or_jsonl, read_text_file

__all__ = ["SourceDocument", "read_documents", "read_changed", "is_index_folder", "path_label", "TEXT_SUFFIXES", "JSON_SUFFIXES", "SkipHandler"]

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
SkipHandler = Callable[[Path, str], None]
_PDF = "PDF is not supported: extract its text first (e.g. pdftotext FILE.pdf FILE.txt) and index that"


@dataclass(frozen=True)
class SourceDocument:
    """One document to index: a stable source id, its text, metadata and the file it came from."""

    source_id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    file: str | None = None


def path_label(path: str | os.PathLike[str]) -> str:
    """The path as valid UTF-8 text: bytes of a non-UTF-8 file name appear as ``\\xNN``; the string ``-`` is ``<stdin>``.

    Example:
        >>> path_label(os.fsdecode(b"notes/caf\\xe9.txt"))
        'notes/caf\\\\xe9.txt'
    """
    if is_stdin(path):
        return STDIN_LABEL
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _unsupported(path: Path) -> str:
    if path.suffix.lower() == ".pdf":
        return _PDF
    kind = f"'{path.suffix}'" if path.suffix else "without an extension"
    return f"unsupported file type {kind}; index .txt, .md, .rst, .json or .jsonl files"


def _kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, for skip reasons (None: a regular file or a folder)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def _inside(target: str, roots: Sequence[str]) -> bool:
    return any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _link_reason(found: Path, roots: Sequence[str], follow_links: bool) -> str | None:
    """Why the symlink ``found`` is skipped, or None to read the file it points to."""
    try:
        target = os.path.realpath(found, strict=True)
        mode = os.stat(found).st_mode
    except FileNotFoundError:
        return "a broken link"
    except OSError as exc:
        return f"a link that cannot be followed ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a link to a folder (links to folders are not followed; give the folder itself to index it)"
    kind = _kind(mode)
    if kind:
        return f"a link to {kind}, not a file"
    if not follow_links and not _inside(target, roots):
        return f"a link to {path_label(target)}, outside the folders being indexed (--follow-links indexes it)"
    return None


_INDEX_FOLDER = "a meteora-edge index folder (index folders are never read as input)"


def is_index_folder(folder: Path) -> bool:
    """Whether ``folder`` is (or is a generation of) a meteora-edge index: its ``manifest.json`` says
    so, or it carries a generation's marker file. Such folders are never read as input."""
    for name in ("manifest.json", ".meteora-edge-generation"):
        try:
            with open(folder / name, "rb") as handle:
                head = handle.read(4096)
        except OSError:
            continue
        if b'"meteora-edge-index"' in head:
            return True
    return False


def _child(folder: str, name: str) -> str:
    """``folder / name`` as pathlib spells it (``.`` / ``a.md`` is ``a.md``), without building a Path per file."""
    return name if folder == "." else os.path.join(folder, name)


def _children(folder: str, skip: SkipHandler) -> Iterator[str]:
    """The entries of ``folder`` that are not hidden, sorted by name (a folder that cannot be read is skipped)."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        skip(Path(folder), "the folder vanished while it was read")
        return iter(())
    except OSError as exc:
        skip(Path(folder), f"cannot read the folder ({exc.strerror or exc})")
        return iter(())
    return iter([_child(folder, name) for name in names if not name.startswith(".")])


#: a file found, with its ``lstat`` when that is also its ``stat`` (a regular file, not a link)
_Found = tuple["Path | str", "os.stat_result | None"]
_SUFFIXES = TEXT_SUFFIXES + JSON_SUFFIXES


def _walk(folder: Path, skip: SkipHandler, follow_links: bool) -> Iterator[_Found]:
    """The files under ``folder`` in sorted path order, walked with a stack (any depth), reporting
    every entry that is not a readable file of a supported type. Paths are strings until reported."""
    roots = [os.path.realpath(folder)]
    stack = [_children(str(folder), skip)]  # the folder given may itself be a link: it is followed
    while stack:
        found = next(stack[-1], None)
        if found is None:
            stack.pop()
            continue
        try:
            info: os.stat_result | None = os.lstat(found)
        except FileNotFoundError:
            skip(Path(found), "it vanished while the folder was read")
            continue
        except OSError as exc:
            skip(Path(found), f"cannot read it ({exc.strerror or exc})")
            continue
        assert info is not None
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            if is_index_folder(Path(found)):
                skip(Path(found), _INDEX_FOLDER)
            else:
                stack.append(_children(found, skip))
            continue
        if stat.S_ISLNK(mode):
            reason, info = _link_reason(Path(found), roots, follow_links), None
        else:
            kind = _kind(mode)
            reason = f"{kind}, not a file" if kind else None
        if reason:
            skip(Path(found), reason)
        elif os.path.splitext(found)[1].lower() in _SUFFIXES:
            yield found, info
        else:
            skip(Path(found), _unsupported(Path(found)))


def _expand(paths: Sequence[str | os.PathLike[str]], skip: SkipHandler, follow_links: bool) -> Iterator[_Found]:
    if sum(is_stdin(raw) for raw in paths) > 1:
        raise InputError("standard input (-) can be read once; give - a single time")
    for raw in paths:
        if is_stdin(raw):
            yield STDIN, None
            continue
        path = Path(raw)
        if path.is_dir() and is_index_folder(path):
            skip(path, _INDEX_FOLDER)
        elif path.is_dir():
            yield from _walk(path, skip, follow_links)
        elif path.suffix.lower() == ".pdf" and path.is_file():
            skip(path, _PDF)
        elif path.exists():
            yield path, None  # a file named on purpose is read as text whatever its extension
        else:
            raise InputError(f"file not found: {path}")


def _file_documents(path: Path | str) -> list[SourceDocument]:
    if is_stdin(path):
        text = read_text_file(STDIN)
        return [SourceDocument(STDIN_LABEL, text, {"source": STDIN_LABEL}, STDIN_LABEL)] if text.strip() else []
    path = Path(path)
    if path.suffix.lower() in JSON_SUFFIXES:
        return _json_documents(path)
    text = read_text_file(path)
    label = path_label(path)
    return [SourceDocument(label, text, {"source": label}, label)] if text.strip() else []


def read_documents(
    paths: Sequence[str | os.PathLike[str]],
    *,
    strict: bool = False,
    on_skip: SkipHandler | None = None,
    follow_links: bool = False,
) -> list[SourceDocument]:
    """Read every document from files and folders (searched recursively); see :func:`_read_documents`."""
    return _read_documents(paths, strict=strict, on_skip=on_skip, follow_links=follow_links)


def read_changed(
    paths: Sequence[str | os.PathLike[str]],
    *,
    unchanged: Callable[[str, tuple[int, int]], bool],
    strict: bool = False,
    on_skip: SkipHandler | None = None,
    follow_links: bool = False,
) -> tuple[list[SourceDocument], set[str], dict[str, tuple[int, int]]]:
    """Read the files under ``paths`` that changed (for ``index sync``).

    Every file is listed and stat-ed first; ``unchanged(absolute path, (size, mtime_ns))``
    says which need not be read again. Nothing to read is not an error.

    Returns:
        ``(documents read, absolute paths of every file listed, (size, mtime_ns) of each file read)``.
    """
    listed: set[str] = set()
    states: dict[str, tuple[int, int]] = {}

    def wanted(path: Path | str, info: os.stat_result | None) -> bool:
        if is_stdin(path):
            return True
        key = os.path.abspath(path)
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
                                allow_empty=True)
    read = {os.path.abspath(d.file) for d in documents if d.file is not None}
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
) -> list[SourceDocument]:
    """Read every document from files and folders (searched recursively).

    Text and markdown files are one document each (id = file path, see :func:`path_label`
    for names that are not UTF-8). JSON/JSONL files
    hold a list of documents (strings or objects with ``text``/``content``/
    ``page_content``, optional ``id``, ``title`` and ``metadata``), also under
    ``{"documents": [...]}`` or ``{"chunks": [...]}``.

    Args:
        paths: files and folders.
        strict: fail on the first file that cannot be used instead of skipping it.
        on_skip: called with ``(path, reason)`` for every skipped file (default: a logged warning).
        follow_links: inside folders, also read symlinked files that point outside the folders
            given (by default they are skipped with their reason; links to folders are never
            followed). A file named in ``paths`` is read wherever it points.

    Returns:
        The documents, in path order; each knows its ``file``.

    Raises:
        InputError: a named path is missing; with ``strict``, a file that cannot be used; or
            nothing readable at all (naming the first skipped file and why).
    """
    if not paths:
        raise InputError("no input given; pass files or folders to index")
    skipped: list[tuple[Path, str]] = []

    def skip(path: Path | str, reason: str) -> None:
        if not is_stdin(path):
            path = Path(path)  # a walked file is a string until it is reported
        label = path_label(path)
        reason = reason.replace(str(path), label)  # a non-UTF-8 file name stays printable
        if strict:
            raise InputError(f"{reason} (--strict)" if label in reason else f"{label}: {reason} (--strict)")
        skipped.append((path, reason))
        if on_skip is not None:
            on_skip(path, reason)
        else:
            logger.warning("skipped %s: %s", label, reason)

    documents: list[SourceDocument] = []
    for path, info in _expand(paths, skip, follow_links):
        if wanted is not None and not wanted(path, info):
            continue
        if not is_stdin(path):
            path = Path(path)  # a walked file is a string until it is read
        try:
            found = _file_documents(path)
        except InputError as exc:
            skip(path, str(exc) if os.path.lexists(path) else "it vanished before it could be read")
            continue
        if found:
            documents += found
        else:
            skip(path, "it holds no text")
    if not documents and not allow_empty:
        first = f"; skipped {len(skipped)} file(s), first {path_label(skipped[0][0])}: {skipped[0][1]}" if skipped else ""
        raise InputError(f"the inputs hold no text to index{first}")
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
        try:
            body = document_text(item, position=position)
        except InputError as exc:
            raise InputError(f"{path_label(path)}: {exc}") from None
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
        out.append(SourceDocument(doc_id, body, meta, path_label(path)))
    return out
