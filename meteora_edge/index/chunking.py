"""Split a text into overlapping word windows that keep their character offsets."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..documents import Chunk
from ..errors import ConfigError, InputError

__all__ = ["chunk_text"]

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
