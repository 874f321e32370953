"""Split a text into overlapping word windows that keep their character offsets.

:func:`iter_chunks` streams: it takes the text as blocks (e.g. a file decoded 1 MiB at a
time) and holds only the current window's text, so memory stays at about one chunk
whatever the input size. :func:`chunk_text` is the same over one string, as a list.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..documents import Chunk
from ..errors import ConfigError, InputError

__all__ = ["chunk_text", "iter_chunks", "check_chunking"]

_WORD = re.compile(r"\S+")
_SPACE = re.compile(r"\s")


def check_chunking(chunk_size: int, overlap: int | None) -> int:
    """Validate the window settings; return the overlap (default ``chunk_size // 10``).

    Raises:
        ConfigError: ``chunk_size`` < 1, or ``overlap`` outside ``0 <= overlap < chunk_size``.
    """
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    if overlap is None:
        overlap = chunk_size // 10
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 0 <= overlap < chunk_size:
        raise ConfigError(f"overlap must be an integer with 0 <= overlap < chunk_size ({chunk_size}), got {overlap!r}")
    return overlap


class _Held:
    """The blocks of text not yet behind the current window, addressed by global offsets."""

    def __init__(self) -> None:
        self.blocks: deque[tuple[int, str]] = deque()

    def add(self, offset: int, block: str) -> None:
        self.blocks.append((offset, block))

    def slice(self, begin: int, end: int) -> str:
        parts = []
        for offset, block in self.blocks:
            if offset >= end:
                break
            if offset + len(block) > begin:
                parts.append(block[max(0, begin - offset) : end - offset])
        return parts[0] if len(parts) == 1 else "".join(parts)

    def drop_before(self, position: int) -> None:
        """Forget whole blocks that end at or before ``position`` (never copies a block)."""
        while self.blocks and self.blocks[0][0] + len(self.blocks[0][1]) <= position:
            self.blocks.popleft()


def _word_spans(blocks: Iterable[str], held: _Held) -> Iterator[tuple[int, int]]:
    """Global ``(start, end)`` of every ``\\S+`` run, joining runs that cross block boundaries."""
    offset = 0
    open_word: int | None = None  # start of a word that reached the end of the previous block
    for block in blocks:
        if not isinstance(block, str):
            raise InputError(f"text must be a string, got {type(block).__name__}")
        if not block:
            continue
        held.add(offset, block)
        position = 0
        if open_word is not None:
            space = _SPACE.search(block)
            if space is None:
                offset += len(block)
                continue  # the word goes on through this whole block
            yield open_word, offset + space.start()
            open_word, position = None, space.start()
        for match in _WORD.finditer(block, position):
            if match.end() == len(block):
                open_word = offset + match.start()
            else:
                yield offset + match.start(), offset + match.end()
        offset += len(block)
    if open_word is not None:
        yield open_word, offset


def iter_chunks(
    blocks: Iterable[str],
    chunk_size: int = 256,
    overlap: int | None = None,
    *,
    metadata: Mapping[str, Any] | None = None,
) -> Iterator[Chunk]:
    """Stream the chunks of a text given as consecutive blocks (see :func:`chunk_text`).

    Only the blocks under the current window are kept, so a file read block by block is
    chunked in memory proportional to one chunk, not to the file.

    Args:
        blocks: the text, in order, in pieces of any size.
        chunk_size, overlap, metadata: as :func:`chunk_text`.

    Yields:
        The chunks, in order; offsets count characters from the start of the first block.

    Raises:
        InputError: a block is not a string, or the text holds no word (after the last block).
        ConfigError: ``chunk_size`` or ``overlap`` is out of range (before any block is read).

    Example:
        >>> [(c.text, c.start_pos) for c in iter_chunks(["one two thr", "ee four five"], chunk_size=3, overlap=1)]
        [('one two three', 0), ('three four five', 8)]
    """
    overlap = check_chunking(chunk_size, overlap)
    step = chunk_size - overlap
    held = _Held()
    window: deque[tuple[int, int]] = deque()
    fresh = 0  # words in the window that no chunk has covered yet
    emitted = 0
    for span in _word_spans(blocks, held):
        window.append(span)
        fresh += 1
        if len(window) < chunk_size:
            continue
        begin, end = window[0][0], window[-1][1]
        text = held.slice(begin, end)
        for _ in range(step):
            window.popleft()
        held.drop_before(window[0][0] if window else end)
        fresh = 0
        yield Chunk(text=text, index=emitted, start_pos=begin, end_pos=end, metadata=dict(metadata or {}))
        emitted += 1
    if fresh:
        begin, end = window[0][0], window[-1][1]
        text = held.slice(begin, end)
        held.blocks.clear()
        yield Chunk(text=text, index=emitted, start_pos=begin, end_pos=end, metadata=dict(metadata or {}))
    elif not emitted:
        raise InputError("text holds no words; nothing to chunk")


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
    return list(iter_chunks([text], chunk_size, overlap, metadata=metadata))
