"""Split a text into overlapping word windows that keep their character offsets."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..documents import Chunk, document_text
from ..errors import ConfigError, InputError

__all__ = ["chunk_text", "chunk_texts", "find_spanning_chunks"]

_WORD = re.compile(r"\S+")


def chunk_text(
    text: str,
    chunk_size: int = 256,
    overlap: int | None = None,
    *,
    metadata: Mapping[str, Any] | None = None,
) -> list[Chunk]:
    """Split ``text`` into windows of ``chunk_size`` words overlapping by ``overlap`` words.

    A word is a run of non-whitespace (``\\S+``). Each chunk's text is the exact substring of
    ``text`` from its first word to its last, so ``text[c.start_pos:c.end_pos] == c.text``.

    Args:
        text: the text to split.
        chunk_size: words per chunk (>= 1).
        overlap: words shared by consecutive chunks; default ``chunk_size // 10``; must be
            smaller than ``chunk_size``.
        metadata: copied into every chunk's metadata.

    Returns:
        The chunks, in order; the last one may be shorter.

    Raises:
        InputError: ``text`` is not a string or holds no word.
        ConfigError: ``chunk_size`` or ``overlap`` is out of range.

    Example:
        >>> [c.text for c in chunk_text("a b c d e", chunk_size=3, overlap=1)]
        ['a b c', 'c d e']
    """
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}")
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if overlap is None:
        overlap = chunk_size // 10
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap < chunk_size:
        raise ConfigError(f"overlap must be an integer with 0 <= overlap < chunk_size ({chunk_size}), got {overlap!r}")
    words = [m.span() for m in _WORD.finditer(text)]
    if not words:
        raise InputError("text holds no words; nothing to chunk")
    step = chunk_size - overlap
    chunks: list[Chunk] = []
    start = 0
    while True:
        window = words[start : start + chunk_size]
        begin, end = window[0][0], window[-1][1]
        chunks.append(
            Chunk(text=text[begin:end], index=len(chunks), start_pos=begin, end_pos=end, metadata=dict(metadata or {}))
        )
        if start + chunk_size >= len(words):
            return chunks
        start += step


def chunk_texts(
    documents: Iterable[object],
    chunk_size: int = 256,
    overlap: int | None = None,
) -> list[Chunk]:
    """Chunk several documents at once, numbering the chunks 0..N-1 across all of them.

    Each chunk keeps offsets into its own document and records it in its metadata:
    ``document_index`` (position of the document) and ``local_chunk_index`` (position of the
    chunk inside it), as METEORA's ``chunk_texts`` does. A mapping's or object's own
    ``metadata`` is copied in as well. Documents without a word are skipped.

    Args:
        documents: texts or documents of any accepted shape (see :mod:`meteora_edge.documents`).
        chunk_size, overlap: as :func:`chunk_text`.

    Raises:
        InputError: a document has no text, or no document holds a word.
        ConfigError: ``chunk_size`` or ``overlap`` is out of range.

    Example:
        >>> [(c.index, c.text, c.metadata["document_index"]) for c in chunk_texts(["a b c", "d"], chunk_size=2, overlap=0)]
        [(0, 'a b', 0), (1, 'c', 0), (2, 'd', 1)]
    """
    chunks: list[Chunk] = []
    for doc_index, document in enumerate(documents):
        text = document_text(document, position=doc_index)
        if not _WORD.search(text):
            continue
        own = document.get("metadata") if isinstance(document, Mapping) else getattr(document, "metadata", None)
        base = dict(own) if isinstance(own, Mapping) else {}
        for local in chunk_text(text, chunk_size, overlap):
            meta = {**base, "document_index": doc_index, "local_chunk_index": local.index}
            chunks.append(Chunk(local.text, len(chunks), local.start_pos, local.end_pos, meta))
    if not chunks:
        raise InputError("the documents hold no words; nothing to chunk")
    return chunks


def _offsets(chunk: object) -> tuple[int | None, int | None, Any]:
    if isinstance(chunk, Chunk):
        return chunk.start_pos, chunk.end_pos, chunk.index
    if isinstance(chunk, Mapping):
        start = chunk.get("start_pos", chunk.get("start"))
        end = chunk.get("end_pos", chunk.get("end"))
        return start, end, chunk.get("index", chunk.get("id"))
    raise InputError(f"chunks must be Chunk objects or mappings with start_pos/end_pos, got {type(chunk).__name__}")


def find_spanning_chunks(span_start: int, span_end: int, chunks: Sequence[object]) -> list[Any]:
    """The indices of the chunks that overlap the character span ``[span_start, span_end)``.

    Use it to turn a gold answer span into gold chunk ids. Offsets are those ``chunk_text``
    writes (``end_pos`` one past the last character), so a chunk that only touches the span
    does not count; an empty span (``start == end``) finds the chunks containing that position.
    Chunks without offsets are ignored; chunks must come from one document.

    Args:
        span_start, span_end: character offsets in the source text, ``span_start <= span_end``.
        chunks: :class:`Chunk` objects or mappings with ``start_pos``/``end_pos`` (or
            ``start``/``end``) and ``index`` (or ``id``); the chunk's position is used without one.

    Returns:
        The overlapping chunks' indices, in the order given.

    Raises:
        InputError: offsets that are not integers, or ``span_start > span_end``.

    Example:
        >>> chunks = chunk_text("alpha beta gamma delta", chunk_size=2, overlap=0)
        >>> find_spanning_chunks(8, 13, chunks)    # "ta ga"
        [0, 1]
    """
    for name, value in (("span_start", span_start), ("span_end", span_end)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"{name} must be an integer >= 0, got {value!r}")
    if span_start > span_end:
        raise InputError(f"span_start ({span_start}) is after span_end ({span_end})")
    found = []
    for position, chunk in enumerate(chunks):
        start, end, index = _offsets(chunk)
        if not isinstance(start, int) or not isinstance(end, int):
            continue
        overlaps = start < span_end and end > span_start if span_end > span_start else start <= span_start < end
        if overlaps:
            found.append(position if index is None else index)
    return found
