"""Why a file was not read, in a word, and one summary line for all of them.

Every skip reported while reading documents carries its reason as a :class:`SkipReason`: the
message (a ``str``, as before) and a ``kind`` to count it under. :class:`SkipTally` collects
them and writes the summary ``skipped 1,204 files: 1,100 binary, 104 over the size limit``;
lines of JSON Lines files skipped on their own are counted apart (``3 bad JSON lines``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..readers import BINARY, MALFORMED, TOO_LARGE, UNREADABLE, UNSUPPORTED

__all__ = ["SkipReason", "SkipTally", "plural", "BINARY", "TOO_LARGE", "UNSUPPORTED", "MALFORMED", "EMPTY", "NO_TEXT_FIELD",
           "UNREADABLE", "LINK", "SPECIAL", "INDEX_FOLDER", "NEEDS_EXTRA", "BAD_LINE"]

EMPTY = "without text"
NO_TEXT_FIELD = "JSON without a text field"
LINK = "links not followed"
SPECIAL = "not regular files"
INDEX_FOLDER = "index folders"
NEEDS_EXTRA = 'needing pip install "meteora-edge[documents]"'
BAD_LINE = "bad line"  # one line of a JSON Lines file, not a whole file


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 document``, ``2 documents``, ``1,204 files`` (``many`` for irregular plurals).

    Example:
        >>> plural(1, "document"), plural(1204, "file"), plural(2, "bad JSON line")
        ('1 document', '1,204 files', '2 bad JSON lines')
    """
    return f"{count:,} {word if count == 1 else many or word + 's'}"


class SkipReason(str):
    """A skip's message (it is the string) and ``kind``, what the summary counts it under."""

    kind: str

    def __new__(cls, message: str, kind: str = MALFORMED) -> SkipReason:
        reason = super().__new__(cls, message)
        reason.kind = kind
        return reason


class SkipTally:
    """Counts skipped files by kind and keeps them, in order, for a ``--verbose`` list."""

    def __init__(self) -> None:
        self.files: list[tuple[Path, str]] = []
        self.lines: list[tuple[Path, str]] = []
        self._kinds: Counter[str] = Counter()

    def __call__(self, path: Path, reason: str) -> None:
        """Record one skip (the ``on_skip`` handler of :func:`~meteora_edge.index.corpus.read_documents`)."""
        kind = getattr(reason, "kind", MALFORMED)
        if kind == BAD_LINE:
            self.lines.append((path, reason))
            return
        self.files.append((path, reason))
        self._kinds[kind] += 1

    def __len__(self) -> int:
        return len(self.files)

    def summary(self) -> str | None:
        """``skipped 3 files: 2 binary, 1 without text; 1 bad JSON line`` (most frequent first), or None."""
        parts = []
        if self.files:
            kinds = ", ".join(f"{count:,} {kind}" for kind, count in
                              sorted(self._kinds.items(), key=lambda item: (-item[1], item[0])))
            parts.append(f"skipped {plural(len(self.files), 'file')}: {kinds}")
        if self.lines:
            parts.append(f"skipped {plural(len(self.lines), 'bad JSON line')}")
        return "; ".join(parts) or None
