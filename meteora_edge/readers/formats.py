"""One reader for every document file: its type from its name (or its bytes), then its text.

Types by name: text (``.txt .md .markdown .rst .text``), JSON (``.json .jsonl .ndjson``),
HTML (``.html .htm .xhtml``), PDF (``.pdf``), Word (``.docx``), and any of these compressed
with gzip (``notes.md.gz``; ``README.gz`` and ``changelog.Debian.gz`` are judged by their
content like the same names without ``.gz``). Names known to hold images, audio, archives or
programs are refused as binary without being read; any other name — none, or one this list
does not know (``README``, ``copyright``, ``setup.cfg``) — is judged by its bytes: a PDF,
gzip or .docx signature, HTML's opening tag, else text in any encoding
(:func:`~meteora_edge.readers.decoding.decode_text`), or binary. Standard input (no name) is
judged by its bytes the same way.

Every refusal is an :class:`UnusableFileError` whose ``kind`` says why in a word, for
summaries; a format whose library is missing raises
:class:`~meteora_edge.errors.MissingExtraError` naming ``pip install "meteora-edge[documents]"``.
"""

from __future__ import annotations

import gzip
import io
import os
import zipfile
import zlib
from dataclasses import dataclass

from ..errors import InputError
from ..fileio import MAX_INPUT_BYTES, read_bytes
from .decoding import NotTextError, binary_head, decode_text

__all__ = ["TEXT_SUFFIXES", "JSON_SUFFIXES", "HTML_SUFFIXES", "ExtractedFile", "UnusableFileError", "read_document_file",
           "read_document_bytes", "kind_by_name", "BINARY", "TOO_LARGE", "UNSUPPORTED", "MALFORMED", "UNREADABLE"]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
_BY_SUFFIX = {**dict.fromkeys(TEXT_SUFFIXES, "text"), **dict.fromkeys(JSON_SUFFIXES, "json"),
              **dict.fromkeys(HTML_SUFFIXES, "html"), ".pdf": "pdf", ".docx": "docx"}
_BINARY_SUFFIXES = frozenset(
    ".png .jpg .jpeg .gif .bmp .ico .icns .webp .tif .tiff .psd .xcf .mp3 .mp4 .m4a .wav .ogg .oga .flac .avi .mov "
    ".mkv .webm .zip .tar .tgz .bz2 .xz .zst .lz .lzma .7z .rar .jar .whl .egg .deb .rpm .so .o .a .dll .dylib .exe "
    ".pyc .pyo .class .woff .woff2 .ttf .otf .eot .pfb .sqlite .sqlite3 .npy .npz .onnx .gguf .pt .pkl "
    ".mo .gmo .iso .img .dmg".split())
_HEAD = 8192
_OTHER_FORMATS = frozenset(".doc .xls .xlsx .ppt .pptx .odt .ods .odp .epub .pages .key .numbers".split())

#: why a file was refused, in a word or two (the CLI's summary counts files by these)
BINARY = "binary"
TOO_LARGE = "over the size limit"
UNSUPPORTED = "of an unsupported type"
MALFORMED = "damaged or malformed"
UNREADABLE = "unreadable"


class UnusableFileError(InputError):
    """A file that holds no document this reader can use; ``kind`` says why (e.g. :data:`BINARY`)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ExtractedFile:
    """What a file holds: its type, its text (one string per PDF page, else one), and a title if it names one.

    ``kind`` is ``"text"``, ``"json"`` (the text is the JSON, to parse), ``"html"``, ``"pdf"`` or ``"docx"``.
    """

    kind: str
    texts: tuple[str, ...]
    title: str | None = None


def kind_by_name(name: str) -> str | None:
    """The type a file name promises (``.gz`` looked through): a kind of :class:`ExtractedFile`,
    ``"binary"``, ``"unsupported"``, or None when only the bytes can tell."""
    stem, suffix = os.path.splitext(name.lower())
    if suffix == ".gz":
        stem, suffix = os.path.splitext(stem)
        if suffix in (".tar", ".cpio"):
            return "binary"
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    if suffix in _BINARY_SUFFIXES:
        return "binary"
    if suffix in _OTHER_FORMATS:
        return "unsupported"
    return None


def _gunzip(data: bytes, where: str, max_bytes: int) -> bytes:
    """The bytes inside a gzip file, refusing more than ``max_bytes`` of them (a decompression bomb)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            inner = stream.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise UnusableFileError(f"{where} is not a valid gzip file ({exc})", MALFORMED) from None
    if len(inner) > max_bytes:
        raise UnusableFileError(f"{where} holds more than {max_bytes:,} bytes uncompressed", TOO_LARGE)
    return inner


def _sniff(data: bytes) -> str | None:
    """The type the bytes' signature shows: ``pdf``, ``gzip``, ``docx``, ``binary`` (another zip), or None."""
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(b"\x1f\x8b"):
        return "gzip"
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                return "docx" if "word/document.xml" in archive.namelist() else "binary"
        except zipfile.BadZipFile:
            return "binary"
    return None


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:256].lower()
    return head.startswith(("<!doctype html", "<html")) or (head.startswith("<?xml") and "<html" in head)


def _extract(kind: str, data: bytes, where: str) -> ExtractedFile:
    if kind == "pdf":
        from .pdf_pages import pdf_pages

        pages, title = pdf_pages(data, where)
        return ExtractedFile("pdf", tuple(pages), title)
    if kind == "docx":
        from .word_files import docx_text

        text, title = docx_text(data, where)
        return ExtractedFile("docx", (text,), title)
    text = decode_text(data, where)
    if kind == "html":
        from .html_text import html_text

        text, title = html_text(text, where)
        return ExtractedFile("html", (text,), title)
    return ExtractedFile(kind, (text,))


def read_document_bytes(data: bytes, name: str | None, where: str, *,
                        max_bytes: int = MAX_INPUT_BYTES) -> ExtractedFile:
    """Extract the text of a file's bytes; its ``name`` (None for standard input) gives its type when it can.

    Args:
        data: the bytes.
        name: the file's name, or None to judge by the bytes alone.
        where: how messages name the file.
        max_bytes: the most a gzip file may hold once decompressed.

    Raises:
        UnusableFileError: binary, of a type this reader does not read, compressed past
            ``max_bytes``, or damaged (``kind`` says which).
        MissingExtraError: the format's library is not installed.
    """
    kind = kind_by_name(name) if name is not None else None
    if kind == "binary":
        raise UnusableFileError(f"{where} is binary, not text", BINARY)
    if kind == "unsupported":
        suffix = os.path.splitext(name or "")[1]
        raise UnusableFileError(f"{where}: '{suffix}' files are not read; save it as .docx, .pdf, .html or text "
                                "to index it", UNSUPPORTED)
    compressed = name is not None and name.lower().endswith(".gz")
    if compressed:
        data = _gunzip(data, where, max_bytes)
    signature = _sniff(data) if kind in (None, "text") else None
    if signature == "gzip" and not compressed:  # gzip under a name that does not say so (or standard input)
        data = _gunzip(data, where, max_bytes)
        signature = _sniff(data)
    if signature == "gzip":
        raise UnusableFileError(f"{where} is gzip-compressed twice", UNSUPPORTED)
    if signature == "binary":
        raise UnusableFileError(f"{where} is an archive, not a document", BINARY)
    try:
        if signature is not None:
            return _extract(signature, data, where)
        if kind is None:
            text = decode_text(data, where)
            if _looks_like_html(text):
                return _extract("html", data, where)
            return ExtractedFile("text", (text,))
        return _extract(kind, data, where)
    except NotTextError as exc:
        raise UnusableFileError(str(exc), BINARY) from None
    except UnusableFileError:
        raise
    except InputError as exc:
        raise UnusableFileError(str(exc), MALFORMED) from None


def _refuse_binary_head(path: str | os.PathLike[str], where: str) -> None:
    """Refuse a large file whose first bytes are binary before reading it whole (a disk image, a core dump)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return  # reading it whole says why
    if not head.startswith((b"%PDF-", b"\x1f\x8b", b"PK\x03\x04")) and binary_head(head):
        raise UnusableFileError(f"{where} is binary, not text", BINARY)


def read_document_file(path: str | os.PathLike[str], where: str, *,
                       max_bytes: int = MAX_INPUT_BYTES) -> ExtractedFile:
    """Read a file (``-``: standard input) and extract its text; see :func:`read_document_bytes`.

    ``max_bytes`` caps the file and, for gzip, what it holds uncompressed. A name known to be
    binary is refused before the file is opened.

    Raises:
        UnusableFileError: as :func:`read_document_bytes`; or the file is missing, a folder, a
            FIFO or device, or unreadable (``kind`` :data:`UNREADABLE`).
        MissingExtraError: as :func:`read_document_bytes`.
    """
    from ..fileio import is_stdin

    name = None if is_stdin(path) else os.path.basename(os.fsdecode(path))
    if name is not None and kind_by_name(name) in ("binary", "unsupported"):
        return read_document_bytes(b"", name, where)  # raises without opening the file
    if name is not None:
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0  # opening it says why
        if size > max_bytes:
            raise UnusableFileError(f"{where} is {size:,} bytes, over the limit of {max_bytes:,}", TOO_LARGE)
        if size > _HEAD and kind_by_name(name) in (None, "text") and not name.lower().endswith(".gz"):
            _refuse_binary_head(path, where)
    try:
        data = read_bytes(path, max_bytes=max_bytes)
    except InputError as exc:
        raise UnusableFileError(str(exc), UNREADABLE) from None
    return read_document_bytes(data, name, where, max_bytes=max_bytes)
