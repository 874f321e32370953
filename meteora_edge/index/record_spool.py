"""A build's chunk records on disk while the build runs, so memory does not grow with the corpus.

:meth:`~meteora_edge.index.local_index.LocalIndex.build` appends each chunk's record line
(see :func:`~meteora_edge.index.chunk_records.record_line`) to a :class:`RecordSpool`, an
unnamed temporary file next to the index (gone when closed or when the process dies, so
nothing half-written is left), keeping only the byte offset and text length of each line.
The embedding reads the texts back by id; the generation's ``chunks.jsonl`` is copied from
the spool block by block.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LocalIndexError
from .vector_spool import Spool, spool_file

__all__ = ["RecordSpool", "SpooledTexts"]

_COPY_BLOCK = 1 << 20


class RecordSpool(Spool):
    """Record lines appended to a temporary file; 16 bytes a chunk stay in memory.

    Args:
        folder: where the temporary file goes (falls back to the system's temporary folder when
            it cannot be created there).
        where: the index being built, for error messages.

    Raises:
        LocalIndexError: the file cannot be written (a full disk): the index is unchanged.
    """

    def __init__(self, folder: Path | None = None, *, where: object = "") -> None:
        self.where = where
        self.size = 0
        self._offsets = array("q")
        self._lengths = array("q")
        self._file = spool_file(folder, "records")

    def __len__(self) -> int:
        return len(self._offsets)

    def append(self, line: bytes, text_length: int) -> None:
        """Add one record line (ending in a newline) whose text has ``text_length`` characters."""
        try:
            os.pwrite(self._file.fileno(), line, self.size)
        except OSError as exc:
            raise LocalIndexError(f"cannot write the index at {self.where}: {exc.strerror or exc} (while spooling "
                                  "its chunk records to a temporary file); the index there is unchanged") from None
        self._offsets.append(self.size)
        self._lengths.append(text_length)
        self.size += len(line)

    def line(self, i: int) -> bytes:
        """The record line of chunk ``i`` (counted from the first appended)."""
        start = self._offsets[i]
        end = self._offsets[i + 1] if i + 1 < len(self._offsets) else self.size
        return os.pread(self._file.fileno(), end - start, start)

    def offsets(self) -> np.ndarray:
        """The byte offset of every line (int64), as ``chunk_offsets.npy`` stores them."""
        return np.frombuffer(self._offsets, dtype=np.int64).copy()

    def text_lengths(self) -> np.ndarray:
        """Each record's text length in characters (int64)."""
        return np.frombuffer(self._lengths, dtype=np.int64)

    def texts(self) -> SpooledTexts:
        """The chunk texts, read back from their lines when asked for."""
        return SpooledTexts(self)

    def write_to(self, out: Any) -> None:
        """Copy every line, in order, to ``out`` (anything with ``.write``), a block at a time."""
        fd = self._file.fileno()
        for lo in range(0, self.size, _COPY_BLOCK):
            out.write(os.pread(fd, min(_COPY_BLOCK, self.size - lo), lo))


class SpooledTexts(Sequence[str]):
    """The texts of a :class:`RecordSpool`'s records; :meth:`lengths` needs no reading."""

    def __init__(self, spool: RecordSpool) -> None:
        self._spool = spool

    def __len__(self) -> int:
        return len(self._spool)

    def __getitem__(self, item):  # type: ignore[override]
        if isinstance(item, slice):
            return [self[i] for i in range(*item.indices(len(self)))]
        return json.loads(self._spool.line(item))["text"]

    def lengths(self) -> np.ndarray:
        """Each text's length in characters (int64)."""
        return self._spool.text_lengths()
