"""A build's vectors on disk while they are computed, so memory stays flat however many chunks there are.

:func:`~meteora_edge.index.chunk_records.embed_batches` embeds chunks in length order and puts
each batch's rows at their chunk ids; a :class:`VectorSpool` writes them into an unnamed
temporary file (gone when closed or when the process dies, so nothing half-written is left)
and later copies them, as a ``.npy`` file, into the index generation.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Self

import numpy as np

from ..errors import LocalIndexError

__all__ = ["Spool", "VectorSpool", "spool_file", "spool_folder"]

_BLOCK_ROWS = 4096  # rows copied per read: 6 MB at 384 dimensions


class Spool:
    """What every spool of a build shares: its unnamed temporary file, closed by ``close`` or ``with``."""

    _file: BinaryIO

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spool_folder(target: Path) -> Path:
    """The nearest existing folder at or above ``target`` (the disk the index goes to)."""
    folder = target.absolute()
    while not folder.is_dir():
        folder = folder.parent
    return folder


def spool_file(folder: Path | None, kind: str) -> BinaryIO:
    """An unnamed temporary file in ``folder`` (the disk the index goes to), else in the system's
    temporary folder (a read-only index folder); gone when closed or when the process dies."""
    try:
        return tempfile.TemporaryFile(dir=folder, prefix=f".{kind}-")
    except OSError:
        return tempfile.TemporaryFile(prefix=f"meteora-edge-{kind}-")


class VectorSpool(Spool):
    """``count`` float32 rows, written by row number into a temporary file.

    Args:
        count: how many rows the spool holds.
        folder: where the temporary file goes (falls back to the system's temporary folder when
            it cannot be created there).
        where: the index being built, for error messages.

    Raises:
        LocalIndexError: the file cannot be written (a full disk): the index is unchanged.
    """

    def __init__(self, count: int, folder: Path | None = None, *, where: object = "") -> None:
        self.count = count
        self.where = where
        self.dimension: int | None = None
        self._file = spool_file(folder, "vectors")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.count, self.dimension or 0)

    def put(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        """Write ``vectors[j]`` as row ``rows[j]`` (float32)."""
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        try:
            if self.dimension is None:
                self.dimension = int(vectors.shape[1])
                self._file.truncate(self.count * self.dimension * 4)
            row_bytes = self.dimension * 4
            fd = self._file.fileno()
            for row, vector in zip(rows.tolist(), vectors):
                os.pwrite(fd, vector.tobytes(), row * row_bytes)
        except OSError as exc:
            raise LocalIndexError(f"cannot write the index at {self.where}: {exc.strerror or exc} (while spooling "
                                  "its vectors to a temporary file); the index there is unchanged") from None

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo`` to ``hi`` (exclusive), read into memory."""
        width = (self.dimension or 0) * 4
        data = os.pread(self._file.fileno(), (hi - lo) * width, lo * width)
        return np.frombuffer(data, dtype="<f4").reshape(hi - lo, self.dimension or 0)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, item: slice | np.ndarray) -> np.ndarray:
        """Rows by a slice (step 1) or by ascending row numbers, read into memory (what the ANN build asks)."""
        if isinstance(item, slice):
            lo, hi, step = item.indices(self.count)
            if step != 1:
                raise IndexError("a spool reads contiguous rows only")
            return self.rows(lo, max(lo, hi))
        wanted = np.asarray(item, dtype=np.int64)
        out = np.empty((wanted.size, self.dimension or 0), dtype="<f4")
        starts = np.searchsorted(wanted, np.arange(0, self.count + _BLOCK_ROWS, _BLOCK_ROWS))
        for block, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
            if a < b:
                lo = block * _BLOCK_ROWS
                out[a:b] = self.rows(lo, min(lo + _BLOCK_ROWS, self.count))[wanted[a:b] - lo]
        return out

    def array(self) -> np.ndarray:
        """All rows in memory (for the ANN structure, which needs them at once)."""
        return self.rows(0, self.count).copy()

    def write_npy(self, out: Any) -> None:
        """Write the rows to ``out`` (anything with ``.write``) as a ``.npy`` file, a block at a time."""
        header = {"descr": "<f4", "fortran_order": False, "shape": self.shape}
        np.lib.format.write_array_header_1_0(out, header)
        for lo in range(0, self.count, _BLOCK_ROWS):
            out.write(self.rows(lo, min(lo + _BLOCK_ROWS, self.count)).tobytes())
