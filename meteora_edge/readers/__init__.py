"""Reading the documents people keep: text in any encoding, HTML, PDF, Word and gzip-compressed files.

``decoding`` turns bytes into text (byte-order marks, UTF-8, UTF-16, a charset detector) and
refuses binary; ``html_text``, ``pdf_pages`` and ``word_files`` extract the words of one format
each through a well-kept library (selectolax, pypdfium2, python-docx: the ``documents`` extra);
``formats`` tells a file's type from its name or bytes and calls the right one. Imports only
``errors`` and ``fileio``: the index's corpus reader and the ``chunk`` command both build on it.
"""

from .decoding import NotTextError, decode_text
from .formats import (
    BINARY,
    HTML_SUFFIXES,
    JSON_SUFFIXES,
    MALFORMED,
    TEXT_SUFFIXES,
    TOO_LARGE,
    UNREADABLE,
    UNSUPPORTED,
    ExtractedFile,
    UnusableFileError,
    kind_by_name,
    read_document_bytes,
    read_document_file,
)

__all__ = [
    "NotTextError",
    "decode_text",
    "ExtractedFile",
    "UnusableFileError",
    "read_document_file",
    "read_document_bytes",
    "kind_by_name",
    "TEXT_SUFFIXES",
    "JSON_SUFFIXES",
    "HTML_SUFFIXES",
    "BINARY",
    "TOO_LARGE",
    "UNSUPPORTED",
    "MALFORMED",
    "UNREADABLE",
]
