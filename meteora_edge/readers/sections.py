"""A document as sections of text to chunk, streamed when it is plain UTF-8.

A plain UTF-8 text file is read block by block (memory stays near one block, whatever its
size); any other file — HTML, PDF, Word, gzip, another encoding — is extracted whole by
:func:`~meteora_edge.readers.formats.read_document_file`. A PDF is one section per page, so
each chunk can name its page.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..fileio import MAX_INPUT_BYTES, is_stdin, iter_text_blocks
from .formats import kind_by_name, read_document_file

__all__ = ["TextSection", "text_sections"]

_HEAD = 1 << 16


@dataclass(frozen=True)
class TextSection:
    """One run of text to chunk: ``blocks()`` gives it afresh each call; ``metadata`` adds e.g. its ``page``."""

    blocks: Callable[[], Iterator[str]]
    metadata: dict[str, Any] = field(default_factory=dict)


def _plain_utf8(path: str | os.PathLike[str], max_bytes: int) -> bool:
    """Whether the file is text in UTF-8 that needs no extraction: a text name (or none), no other
    format's signature, no NUL and no UTF-16/32 mark at the start, and every byte valid UTF-8."""
    if kind_by_name(os.path.basename(os.fsdecode(path))) not in ("text", None):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return False
    if head.startswith((b"%PDF-", b"\x1f\x8b", b"PK\x03\x04", codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) \
            or b"\x00" in head:
        return False
    start = head.lstrip()[:256].lower()
    if start.startswith((b"<!doctype html", b"<html", b"\xef\xbb\xbf<!doctype html", b"\xef\xbb\xbf<html")):
        return False
    try:
        for _ in iter_text_blocks(path, max_bytes=max_bytes):
            pass
    except InputError:
        return False
    return True


def text_sections(path: str | os.PathLike[str], where: str, *, max_bytes: int = MAX_INPUT_BYTES) -> list[TextSection]:
    """The sections of text of a document file (``-``: standard input), in order.

    Args:
        path: the file.
        where: how messages name it.
        max_bytes: the largest file (and gzip content) read.

    Returns:
        One section, or one per PDF page that holds text (``metadata["page"]``, from 1); the
        ``title`` of an HTML, PDF or Word file is in every section's metadata.

    Raises:
        UnusableFileError: binary, of an unsupported type, damaged, or unreadable.
        MissingExtraError: the format's library is not installed.
        InputError: the file holds no text.
    """
    if not is_stdin(path) and _plain_utf8(path, max_bytes):
        return [TextSection(lambda: iter_text_blocks(path, max_bytes=max_bytes))]  # drops a UTF-8 BOM
    extracted = read_document_file(path, where, max_bytes=max_bytes)
    base = {"title": extracted.title} if extracted.title else {}
    if extracted.kind == "pdf":
        sections = [TextSection((lambda t=text: iter([t])), {**base, "page": number})
                    for number, text in enumerate(extracted.texts, start=1) if text.strip()]
    else:
        sections = [TextSection((lambda t=extracted.texts[0]: iter([t])), base)] if extracted.texts[0].strip() else []
    if not sections:
        raise InputError(f"{where} holds no words; nothing to chunk")
    return sections
