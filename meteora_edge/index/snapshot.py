"""Opening one version of an index: read the pointer, open and check every file, keep them open.

A reader reads the pointer (``manifest.json`` at the top of the index folder), opens every
file of the generation it names and checks sizes, hashes and the manifest's schema. The
caller memory-maps the arrays and keeps a descriptor of the chunk file, so it keeps
reading the version it opened while writers replace it: on Linux and macOS a removed file
stays readable through open descriptors and mappings (Windows forbids removing open files
and is not supported for concurrent use). If a writer removed the generation between the
pointer read and the opens, the reader reads the pointer again. The layout and the writer
side are in :mod:`meteora_edge.index.generations`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .manifest import (
    INDEX_FORMAT,
    INDEX_FORMAT_VERSION,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    check_manifest,
    generation_files,
    check_pointer,
    parse_strict_json,
)
from ..errors import LocalIndexError

__all__ = ["Snapshot", "open_snapshot", "open_regular", "read_npy", "read_small_file"]

_OPEN_ATTEMPTS = 8
_BLOCK = 1 << 20


@dataclass
class Snapshot:
    """The open files of one index version: the manifest and a handle per required file."""

    root: Path
    folder: Path
    generation: str | None
    manifest: dict[str, Any]
    handles: dict[str, BinaryIO]

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()


def open_regular(path: Path) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file, never waiting on a FIFO.

    Raises:
        OSError: as ``open`` does; ``EINVAL`` ("not a regular file") for a FIFO, device, socket or folder.
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it changes nothing for a regular file
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket)", str(path))
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_small_file(path: Path) -> bytes:
    """The first ``MAX_MANIFEST_BYTES + 1`` bytes of a regular file (enough to refuse an oversized manifest).

    Raises:
        OSError: as :func:`open_regular`.
    """
    with open_regular(path) as handle:
        return handle.read(MAX_MANIFEST_BYTES + 1)


def _pointer_bytes(root: Path) -> bytes:
    path = root / MANIFEST
    try:
        return read_small_file(path)
    except FileNotFoundError:
        raise LocalIndexError(f"{root} holds no index ({MANIFEST} is missing): not an index, or a first build "
                              "that did not finish; build it again") from None
    except IsADirectoryError:
        raise LocalIndexError(f"{path} is a folder, not a manifest file: {root} is not a meteora-edge index") from None
    except OSError as exc:
        raise LocalIndexError(f"cannot read {path}: {exc.strerror or exc}") from None


def open_snapshot(root: Path, *, verify: bool) -> Snapshot:
    """Open the version of the index at ``root`` that its pointer names now.

    Args:
        root: the index folder.
        verify: check every file's sha256 (sizes are always checked).

    Raises:
        LocalIndexError: no index, a newer format, a manifest off its schema, or a file
            that is missing, not a regular file, of the wrong size or hash.
    """
    if not root.is_dir():
        raise LocalIndexError(f"index folder not found: {root}; build one with 'meteora-edge index build'")
    for _ in range(_OPEN_ATTEMPTS):
        pointer = _pointer_bytes(root)
        try:
            return _open_version(root, pointer, verify)
        except FileNotFoundError as exc:
            try:
                moved = read_small_file(root / MANIFEST) != pointer
            except OSError:
                moved = True
            if not moved:
                raise LocalIndexError(f"{exc.filename} is missing from the index; rebuild it") from None
            # a writer switched versions while we opened this one: read the new pointer
    raise LocalIndexError(f"{root} changed {_OPEN_ATTEMPTS} times while it was being opened; try again")


def _open_version(root: Path, pointer: bytes, verify: bool) -> Snapshot:
    where = str(root / MANIFEST)
    data = parse_strict_json(pointer, where)
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise LocalIndexError(f"{root} is not a meteora-edge index")
    version = data.get("format_version")
    if type(version) is int and version > INDEX_FORMAT_VERSION:
        raise LocalIndexError(
            f"{root} has index format version {version}, written by a newer meteora-edge; this one reads up to "
            f"{INDEX_FORMAT_VERSION}: upgrade meteora-edge (pip install -U meteora-edge) to open it"
        )
    if version == 1:
        generation, folder, manifest = None, root, check_manifest(data, where, version=1)
    elif version in (2, INDEX_FORMAT_VERSION):
        generation = check_pointer(data, where)
        folder = root / generation
        try:
            raw = read_small_file(folder / MANIFEST)
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(2, "missing", str(folder / MANIFEST)) from None
        except OSError as exc:
            raise LocalIndexError(f"cannot read {folder / MANIFEST}: {exc.strerror or exc}") from None
        manifest = check_manifest(parse_strict_json(raw, str(folder / MANIFEST)), str(folder / MANIFEST),
                                  version=version)
    else:
        raise LocalIndexError(
            f"{where} is corrupt: format_version must be 1, 2 or {INDEX_FORMAT_VERSION}, got {version!r:.40}"
        )
    snapshot = Snapshot(root, folder, generation, manifest, {})
    try:
        for name in generation_files(manifest):
            snapshot.handles[name] = _open_checked(folder / name, manifest["files"][name], verify)
    except BaseException:
        snapshot.close()
        raise
    return snapshot


def _open_checked(path: Path, entry: dict[str, Any], verify: bool) -> BinaryIO:
    try:
        handle = open_regular(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise LocalIndexError(f"{path} is not a regular file; rebuild the index") from None
        raise LocalIndexError(f"cannot open {path} ({exc.strerror or exc}); rebuild the index") from None
    try:
        info = os.fstat(handle.fileno())
        if info.st_size != entry["size"]:
            raise LocalIndexError(f"{path} has the wrong size (truncated or replaced); rebuild the index")
        if verify:
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(_BLOCK), b""):
                digest.update(block)
            handle.seek(0)
            if digest.hexdigest() != entry["sha256"]:
                raise LocalIndexError(f"{path} does not match its sha256 (corrupt or tampered); rebuild the index")
    except BaseException:
        handle.close()
        raise
    return handle


def read_npy(handle: BinaryIO, *, dtype: np.dtype, shape: tuple[int, ...] | None, mmap: bool, where: str) -> np.ndarray:
    """Read a ``.npy`` file from an open handle: check dtype and shape, then map or copy it.

    Args:
        handle: positioned at the start of the file.
        dtype: the only dtype accepted (never an object dtype).
        shape: the exact shape expected, or ``None`` for any 1-D array.
        mmap: memory-map (read-only) instead of reading into memory.
        where: names the file in error messages.

    Raises:
        LocalIndexError: a bad header, another dtype or shape, or a size that does not fit.
    """
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            found_shape, fortran, found_dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            found_shape, fortran, found_dtype = np.lib.format.read_array_header_2_0(handle)
        else:
            raise ValueError(f"npy version {version}")
    except ValueError as exc:
        raise LocalIndexError(f"{where} is not a readable array ({exc}); rebuild the index") from None
    wrong_shape = len(found_shape) != 1 if shape is None else found_shape != shape
    if found_dtype != dtype or fortran or wrong_shape:
        raise LocalIndexError(
            f"{where} holds {found_dtype} {found_shape}, expected {dtype} {shape or '(n,)'}; rebuild the index"
        )
    offset = handle.tell()
    size = os.fstat(handle.fileno()).st_size
    if offset + int(np.prod(found_shape)) * dtype.itemsize != size:
        raise LocalIndexError(f"{where} is {size} bytes, which does not fit its header; rebuild the index")
    if size == offset:
        return np.zeros(found_shape, dtype=dtype)
    if mmap:
        return np.memmap(handle, dtype=dtype, mode="r", offset=offset, shape=found_shape)
    return np.frombuffer(handle.read(), dtype=dtype).reshape(found_shape)


