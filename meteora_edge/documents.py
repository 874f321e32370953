"""Documents of every accepted shape, reduced to their text without touching them.

Accepted: ``str``; mappings with ``text``, ``content`` or ``page_content``; :class:`Chunk`;
objects with a ``.page_content``, ``.text`` or ``.content`` attribute (LangChain-, LlamaIndex- and MeVe-like).
The caller's objects are never mutated; facades hand the same objects back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError

__all__ = ["Chunk", "document_text", "document_texts", "check_unicode"]

_TEXT_KEYS = ("text", "content", "page_content")
_TEXT_ATTRS = ("page_content", "text", "content")
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(text: str, what: str) -> str:
    """Return ``text`` unless it holds a lone surrogate (U+D800–U+DFFF), which is not valid Unicode.

    Such characters come from a JSON escape like ``"\\ud800"`` or a non-UTF-8 byte read with
    ``surrogateescape``; no tokenizer, JSON writer or UTF-8 file can take them.

    Raises:
        InputError: naming ``what``, the character and its position.
    """
    match = _SURROGATE.search(text)
    if match is not None:
        raise InputError(
            f"{what} holds {match.group()!r} at character {match.start()}, a lone surrogate that is not valid "
            "Unicode; fix the encoding of its source"
        )
    return text


@dataclass(frozen=True)
class Chunk:
    """A piece of a document with its character offsets in the source text.

    Args:
        text: the chunk's text (an exact substring of the source when made by ``chunk_text``).
        index: position of the chunk in its document.
        start_pos: offset of the first character in the source text.
        end_pos: offset one past the last character.
        metadata: free-form information (source id, title, …).
    """

    text: str
    index: int = 0
    start_pos: int = 0
    end_pos: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "index": self.index,
            "start_pos": self.start_pos,
            "end_pos": self.end_pos,
            "metadata": dict(self.metadata),
        }


def document_text(document: object, *, position: int | None = None) -> str:
    """Return the text of one document of any accepted shape.

    Args:
        document: the document.
        position: its position in the caller's list, used in error messages.

    Returns:
        The text, unchanged.

    Raises:
        InputError: the document has no text, the text is not a string or holds a lone surrogate.
    """
    where = "" if position is None else f" at position {position}"
    if isinstance(document, str):
        text: object = document
    elif isinstance(document, Mapping):
        key = next((k for k in _TEXT_KEYS if k in document), None)
        if key is None:
            raise InputError(
                f"document{where} is a mapping without a text: keys {sorted(map(str, document))[:6]}; "
                f"give it one of the keys {', '.join(_TEXT_KEYS)}"
            )
        text = document[key]
    else:
        attr = next((a for a in _TEXT_ATTRS if hasattr(document, a)), None)
        if attr is None:
            raise InputError(
                f"document{where} of type {type(document).__name__} has no text; pass a string, "
                "a mapping with 'text', a Chunk, or an object with .page_content or .text"
            )
        text = getattr(document, attr)
    if not isinstance(text, str):
        raise InputError(f"document{where} has a text of type {type(text).__name__}; it must be a string")
    return check_unicode(text, f"document{where}")


def document_texts(documents: Sequence[object], *, allow_empty_text: bool = False) -> list[str]:
    """Return the texts of a sequence of documents, checking each.

    Args:
        documents: the documents (any accepted shape, mixed shapes allowed).
        allow_empty_text: accept documents whose text is empty or whitespace.

    Returns:
        The texts, in input order.

    Raises:
        InputError: ``documents`` is not a list-like sequence, or a document has no usable text.
    """
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise InputError(
            f"documents must be a list of documents, got {type(documents).__name__}; wrap a single text in a list"
        )
    texts = []
    for position, document in enumerate(documents):
        text = document_text(document, position=position)
        if not allow_empty_text and not text.strip():
            raise InputError(f"document at position {position} has an empty text; drop it or give it content")
        texts.append(text)
    return texts
