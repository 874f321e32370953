"""A build's source table written one source at a time, so it does not grow in memory with the sources.

:func:`~meteora_edge.index.updates.build_table` groups every document by source and holds the
whole table (about 800 bytes a source: 0.8 GB for a million one-chunk documents). A build's
documents almost always come source by source (a file's documents together), so a
:class:`TableSpool` finishes each source's entry when the next source starts, writes its
``sources.json`` row to an unnamed temporary file and keeps only its key and place (about 80
bytes). :meth:`~TableSpool.write_to` writes the rows sorted by key: the very bytes
:func:`~meteora_edge.index.sources.encode_table` gives. When a source comes back after another
(documents not grouped), :meth:`~TableSpool.grouped` says so and the build falls back to
:func:`~meteora_edge.index.updates.build_table`.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from pathlib import Path
from typing import Any

from ..errors import LocalIndexError
from ..fileio import RealPaths
from .corpus import SourceDocument
from .sources import SourceEntry, encode_row, file_state, hash_document, source_key, text_hash, write_table
from .vector_spool import Spool, spool_file

__all__ = ["TableSpool"]


class _Source:
    """The source being read: its first document, content digest and chunk ranges."""

    def __init__(self, key: str, first: SourceDocument) -> None:
        self.key = key
        self.label = first.file if first.file is not None else first.source_id
        self.digest = hashlib.sha256()
        self.ranges: list[tuple[str, int, int]] = []


class TableSpool(Spool):
    """Source-table rows on disk, finished source by source.

    Args:
        folder: where the temporary file goes (falls back to the system's temporary folder).
        where: the index being built, for error messages.
    """

    def __init__(self, folder: Path | None = None, *, where: object = "") -> None:
        self.where = where
        self._file = spool_file(folder, "sources")
        self._keys: list[str] = []
        self._offsets, self._sizes = array("q"), array("q")
        self._spilled = 0
        self._open: _Source | None = None
        self._real = RealPaths()

    def add(self, document: SourceDocument, first: int, end: int) -> None:
        """The next document, which made chunks ``first`` to ``end`` (exclusive)."""
        key = source_key(document, self._real)
        if self._open is None or self._open.key != key:
            self._finish()
            self._open = _Source(key, document)
        hash_document(self._open.digest, document)
        if first < end:
            self._open.ranges.append((text_hash(document.text), first, end))

    def _finish(self) -> None:
        source, self._open = self._open, None
        if source is None:
            return
        row = b""
        if source.ranges:  # a source whose documents made no chunk has no entry (but its key still counts)
            size, mtime = file_state(source.key)
            row = encode_row(SourceEntry(source.key, source.label, size, mtime, source.digest.hexdigest(),
                                         tuple(source.ranges)))
            try:
                os.pwrite(self._file.fileno(), row, self._spilled)
            except OSError as exc:
                raise LocalIndexError(f"cannot write the index at {self.where}: {exc.strerror or exc} (while "
                                      "spooling its source table to a temporary file); the index there is "
                                      "unchanged") from None
        self._keys.append(source.key)
        self._offsets.append(self._spilled)
        self._sizes.append(len(row))
        self._spilled += len(row)

    def _order(self) -> list[int]:
        self._finish()
        return sorted(range(len(self._keys)), key=self._keys.__getitem__)

    def grouped(self) -> bool:
        """Whether every source's documents came together (else the rows here are not the table)."""
        order = self._order()
        return all(self._keys[a] != self._keys[b] for a, b in zip(order, order[1:]))

    def write_to(self, out: Any) -> None:
        """Write ``sources.json`` to ``out`` (anything with ``.write``)."""
        fd = self._file.fileno()
        rows = (os.pread(fd, self._sizes[i], self._offsets[i]) for i in self._order() if self._sizes[i])
        write_table(rows, out)
