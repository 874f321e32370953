"""Split a text into chunks of at most ``chunk_size`` words that keep their character offsets.

Two ways to cut (``boundaries``):

* ``"text"`` (the default): a chunk ends where the text does — at a paragraph break (a blank
  line, a heading, a list item), else a sentence end — when one lies in the second half of the
  window, so a clause, a paragraph or a list item stays whole and its neighbours do not repeat
  it. Only a sentence too long for the window is cut inside, and then the next chunk starts
  ``overlap`` words back, as with ``"words"``. Selections over such chunks hold more of the
  evidence and less else than over fixed windows of the same size, on both dev sets and at
  every size measured (docs/corpus.md).
* ``"words"``: fixed windows of ``chunk_size`` words, each sharing ``overlap`` words with the next
  (how an index recorded without a ``boundaries`` key was cut).

:func:`iter_chunks` streams: it takes the text as blocks (e.g. a file decoded 1 MiB at a
time) and holds only the current window's text, so memory stays at about one chunk
whatever the input size. :func:`chunk_text` is the same over one string, as a list. The
``chunk`` command and every index chunk through these functions.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..documents import Chunk, document_text
from ..errors import ConfigError, InputError

__all__ = ["chunk_text", "iter_chunks", "check_chunking", "chunk_texts", "find_spanning_chunks", "count_words",
           "BOUNDARIES", "DEFAULT_BOUNDARIES", "stored_boundaries", "sentence_spans"]

_WORD = re.compile(r"\S+")
_SPACE = re.compile(r"\s")

#: How a chunk may end: where the text does (paragraph, heading, list item, sentence) or after any word.
BOUNDARIES = ("text", "words")
DEFAULT_BOUNDARIES = "text"

_PARAGRAPH, _SENTENCE = 2, 1  # how strong a break before a word is (0: inside a sentence)
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_ITEM = re.compile(r"(?:#{1,6}|[-*+\u2022>|]|\d{1,3}[.)]|[a-zA-Z][.)])$")  # a line opening a heading, item, quote or table row
_SENTENCE_END = re.compile(r"[.!?\u3002][\"'\u201d\u2019)\]]*$")


def _break_before(gap: str, previous: str, word: str) -> int:
    """How strongly the text breaks between ``previous`` and ``word`` separated by ``gap`` (whitespace)."""
    if "\n" in gap and (_BLANK_LINE.search(gap) or _ITEM.match(word)):
        return _PARAGRAPH
    if _SENTENCE_END.search(previous):
        first = next((c for c in word if c.isalnum()), "")
        if first.isupper() or first.isdigit() or (not first and "\n" in gap):
            return _SENTENCE
    return 0


def stored_boundaries(chunking: Mapping[str, Any]) -> str:
    """The ``boundaries`` an index's ``chunking`` record names; ``"words"`` for an index written before
    the record had the key (its chunks were fixed word windows, and its updates must cut the same way)."""
    value = chunking.get("boundaries", "words")
    return value if value in BOUNDARIES else "words"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence (or paragraph, heading, list item) of ``text``, by the chunker's breaks.

    Example:
        >>> t = "Fees are due. Either party may end it.\\n\\n# Notices"
        >>> [t[a:b] for a, b in sentence_spans(t)]
        ['Fees are due.', 'Either party may end it.', '# Notices']
    """
    spans: list[tuple[int, int]] = []
    previous: re.Match[str] | None = None
    for match in _WORD.finditer(text):
        if previous is None or _break_before(text[previous.end() : match.start()], previous.group(), match.group()):
            spans.append((match.start(), match.end()))
        else:
            spans[-1] = (spans[-1][0], match.end())
        previous = match
    return spans


def count_words(text: str) -> int:
    """How many words the chunker sees in ``text`` (runs of non-space characters)."""
    return sum(1 for _ in _WORD.finditer(text))


def check_chunking(chunk_size: int, overlap: int | None, boundaries: str = DEFAULT_BOUNDARIES) -> int:
    """Validate the window settings; return the overlap (default ``chunk_size // 10``).

    Raises:
        ConfigError: ``chunk_size`` < 1, ``overlap`` outside ``0 <= overlap < chunk_size``, or an
            unknown ``boundaries``.
    """
    if boundaries not in BOUNDARIES:
        raise ConfigError(f"boundaries must be one of {', '.join(BOUNDARIES)}, got {boundaries!r}")
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
        for offset, block in self.blocks:  # nearly always one block holds the whole range (a word, a gap)
            if offset <= begin and end <= offset + len(block):
                return block[begin - offset : end - offset]
        # across blocks: a block outside [begin, end) gives an empty slice
        return "".join(block[max(0, begin - offset) : max(0, end - offset)] for offset, block in self.blocks)

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
    boundaries: str = DEFAULT_BOUNDARIES,
) -> Iterator[Chunk]:
    """Stream the chunks of a text given as consecutive blocks (see :func:`chunk_text`).

    Only the blocks under the current window are kept, so a file read block by block is
    chunked in memory proportional to one chunk, not to the file.

    Args:
        blocks: the text, in order, in pieces of any size.
        chunk_size, overlap, metadata, boundaries: as :func:`chunk_text`.

    Yields:
        The chunks, in order; offsets count characters from the start of the first block.

    Raises:
        InputError: a block is not a string, or the text holds no word (after the last block).
        ConfigError: ``chunk_size``, ``overlap`` or ``boundaries`` is out of range (before any block is read).

    Example:
        >>> [(c.text, c.start_pos) for c in iter_chunks(["one two thr", "ee four five"], chunk_size=3, overlap=1)]
        [('one two three', 0), ('three four five', 8)]
        >>> [c.text for c in iter_chunks(["Fees are due. Either party may end it.", " It ends."], chunk_size=6,
        ...                              boundaries="text")]
        ['Fees are due.', 'Either party may end it.', 'It ends.']
    """
    overlap = check_chunking(chunk_size, overlap, boundaries)
    by_text = boundaries == "text"
    lowest = max(1, chunk_size // 2)  # a chunk cut at a break fills at least half the window
    held = _Held()
    window: deque[tuple[int, int]] = deque()
    strength: deque[int] = deque()  # the break before each word of the window
    covered = -1  # where the last chunk ended: the window's words after it are fresh
    emitted = 0

    def chunk(words: int) -> Chunk:
        begin, end = window[0][0], window[words - 1][1]
        return Chunk(text=held.slice(begin, end), index=emitted, start_pos=begin, end_pos=end,
                     metadata=dict(metadata or {}))

    for span in _word_spans(blocks, held):
        if by_text:
            previous = window[-1] if window else None
            strength.append(0 if previous is None else _break_before(
                held.slice(previous[1], span[0]), held.slice(*previous), held.slice(*span)))
        window.append(span)
        if len(window) <= chunk_size:
            continue
        cut, back = chunk_size, overlap  # a hard cut, after chunk_size words: the next chunk starts overlap words back
        if by_text:
            marks = list(strength)[lowest : chunk_size + 1]  # a deque indexes its middle slowly
            top = max(marks)
            if top:  # the strongest break, the latest of equals
                cut, back = lowest + len(marks) - 1 - marks[::-1].index(top), 0
        made = chunk(cut)
        emitted += 1
        covered = window[cut - 1][1]
        for _ in range(cut - back):
            window.popleft()
            if by_text:
                strength.popleft()
        held.drop_before(window[0][0])  # before the chunk goes out: what lies behind the window is let go
        yield made
    if window and window[-1][1] > covered:
        yield chunk(len(window))
        held.blocks.clear()
    elif not emitted:
        raise InputError("text holds no words; nothing to chunk")


def chunk_text(
    text: str,
    chunk_size: int = 256,
    overlap: int | None = None,
    *,
    metadata: Mapping[str, Any] | None = None,
    boundaries: str = DEFAULT_BOUNDARIES,
) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``chunk_size`` words (see the module doc for ``boundaries``).

    A word is a run of non-whitespace (``\\S+``). Each chunk's text is the exact substring of
    ``text`` from its first word to its last, so ``text[c.start_pos:c.end_pos] == c.text``.

    Args:
        text: the text to split.
        chunk_size: words per chunk at most (>= 1).
        overlap: words shared by consecutive chunks (with ``"text"`` boundaries, only where a
            chunk ends inside a sentence); default ``chunk_size // 10``; must be smaller than ``chunk_size``.
        metadata: copied into every chunk's metadata.
        boundaries: ``"text"`` (end chunks at paragraph and sentence breaks) or ``"words"`` (fixed windows).

    Returns:
        The chunks, in order; the last one may be shorter.

    Raises:
        InputError: ``text`` is not a string or holds no word.
        ConfigError: ``chunk_size``, ``overlap`` or ``boundaries`` is out of range.

    Example:
        >>> [c.text for c in chunk_text("a b c d e", chunk_size=3, overlap=1)]
        ['a b c', 'c d e']
        >>> [c.text for c in chunk_text("1. Term. Two years.\\n\\n2. Fees. Monthly.", chunk_size=5, boundaries="text")]
        ['1. Term. Two years.', '2. Fees. Monthly.']
    """
    if not isinstance(text, str):
        raise InputError(f"text must be a string, got {type(text).__name__}")
    return list(iter_chunks([text], chunk_size, overlap, metadata=metadata, boundaries=boundaries))


def chunk_texts(
    documents: Iterable[object],
    chunk_size: int = 256,
    overlap: int | None = None,
    *,
    boundaries: str = DEFAULT_BOUNDARIES,
) -> list[Chunk]:
    """Chunk several documents at once, numbering the chunks 0..N-1 across all of them.

    Each chunk keeps offsets into its own document and records it in its metadata:
    ``document_index`` (position of the document) and ``local_chunk_index`` (position of the
    chunk inside it), as METEORA's ``chunk_texts`` does. A mapping's or object's own
    ``metadata`` is copied in as well. Documents without a word are skipped.

    Args:
        documents: texts or documents of any accepted shape (see :mod:`meteora_edge.documents`).
        chunk_size, overlap, boundaries: as :func:`chunk_text`.

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
        for local in chunk_text(text, chunk_size, overlap, boundaries=boundaries):
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
