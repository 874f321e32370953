"""How an index lives on disk: immutable generation folders, an atomic pointer, a writer lock.

Layout (format 2)::

    my.index/
      manifest.json           the pointer: {"format", "format_version": 2, "generation": "gen-000003-1f2e3d4c"}
      .writer.lock            the writer lock (flock through ``filelock``; stays in place)
      gen-000003-1f2e3d4c/    the live generation, never modified after the pointer names it
        .meteora-edge-generation   the marker, written first: {"format", "generation": its own name}
        manifest.json         encoder, chunking, count, last write, sha256 and size of every file
        vectors.npy  chunks.jsonl  chunk_offsets.npy  bm25_*.npy  bm25_vocab.json

Writers take the lock, remove what killed writers left (unnamed generations carrying the
marker, pointer temporaries; a folder only named like a generation is never removed), write a new
generation and a temporary pointer naming it, fsync all of them (every file, the generation
folder, the index folder and the temporary pointer, together: see :func:`fsync_together`),
replace the pointer (``os.replace``, then fsync the folder) and remove the generation it
superseded. A kill at any moment leaves the pointer naming the old or the new generation,
both complete; a power loss, too, since nothing the pointer names is left unsynced when it moves.

Readers (:mod:`meteora_edge.index.snapshot`) open the generation the pointer names and
keep its files open, so they keep reading that version while writers replace it.

Format 1 (every file directly in the folder, ``manifest.json`` the whole manifest) still
opens; the next write turns it into format 2.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
from filelock import FileLock, Timeout

from .manifest import (
    ANN_FILE,
    GENERATION_NAME,
    INDEX_FORMAT,
    INDEX_FORMAT_VERSION,
    MANIFEST,
    REQUIRED_FILES,
    check_pointer,
    generation_files,
    parse_strict_json,
)
from .snapshot import read_small_file
from ..errors import ConfigError, InputError, LocalIndexError
from ..fileio import give_normal_permissions

__all__ = ["live_generation", "WRITER_LOCK", "GENERATION_MARKER", "DEFAULT_LOCK_TIMEOUT", "LOCK_TIMEOUT_ENV", "lock_timeout", "target_state", "writer_lock", "GenerationWriter", "new_generation"]

logger = logging.getLogger(__name__)

WRITER_LOCK = ".writer.lock"
#: Written first into every generation folder, naming it: the proof that the folder is this index's.
GENERATION_MARKER = ".meteora-edge-generation"
#: Seconds a writer waits for another writer's lock, unless ``lock_timeout=`` or the variable below says otherwise.
DEFAULT_LOCK_TIMEOUT = 60.0
LOCK_TIMEOUT_ENV = "METEORA_EDGE_LOCK_TIMEOUT"
_POINTER_TMP = (f".{MANIFEST}.", ".tmp")


def _fsync_folder(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # fsync flushes the file, whichever descriptor names it
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_together(files: Sequence[Path], folders: Sequence[Path]) -> None:
    """fsync every file and folder, all at once: each is on disk when this returns, as with one
    fsync after another, but a journaling file system commits them in one go instead of one
    transaction each (an update makes 16 fsyncs in three rounds). Raises the first OSError."""
    jobs = [(_fsync_file, p) for p in files] + [(_fsync_folder, p) for p in folders]
    with ThreadPoolExecutor(max_workers=min(len(jobs), 16) or 1) as pool:
        for future in [pool.submit(fn, path) for fn, path in jobs]:
            future.result()


def _is_pointer_tmp(name: str) -> bool:
    return name.startswith(_POINTER_TMP[0]) and name.endswith(_POINTER_TMP[1])


def _marker_bytes(generation: str) -> bytes:
    return _json_bytes({"format": INDEX_FORMAT, "generation": generation})


def _written_here(folder: Path, *, legacy: bool = False) -> bool:
    """Whether the generation-named entry ``folder`` is provably a generation an index wrote.

    A generation holds :data:`GENERATION_MARKER` (written before anything else) naming it; an
    empty folder (a writer killed between mkdir and the marker) holds nothing to lose. With
    ``legacy`` (inside a folder whose pointer names a live generation), a folder holding only
    names an index writes also counts: generations written before the marker existed.
    A symlink, a file, or a folder of anything else is somebody else's and is kept.
    """
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return False
        names = os.listdir(folder)
        if not names:
            return True
        if GENERATION_MARKER in names and read_small_file(folder / GENERATION_MARKER) == _marker_bytes(folder.name):
            return True
    except OSError:
        return False
    return legacy and set(names) <= {*REQUIRED_FILES, ANN_FILE, MANIFEST}


def _is_index_marker(path: Path) -> bool:
    try:
        data = parse_strict_json(read_small_file(path), str(path))
    except (OSError, LocalIndexError):
        return False
    return isinstance(data, dict) and data.get("format") == INDEX_FORMAT


def target_state(root: Path) -> Literal["free", "index"]:
    """Whether ``root`` may receive a new index: ``"free"`` or ``"index"`` (an index to replace).

    Free means missing, empty, or holding only what a killed first build left: the (empty)
    lock file, pointer temporaries and generation folders that carry this index's marker (see
    :func:`_written_here`). A file, or a folder with anything else (folders merely named like
    generations included), is refused.

    Raises:
        InputError: ``root`` is a file, or a folder that is not a meteora-edge index.
    """
    if not os.path.lexists(root):
        return "free"
    refuse = "refusing to touch it; choose another --out"
    if not root.is_dir():
        raise InputError(f"{root} exists and is not a folder; {refuse}")
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise InputError(f"cannot read {root}: {exc.strerror or exc}") from None
    if MANIFEST in names:
        if _is_index_marker(root / MANIFEST):
            return "index"
        raise InputError(f"{root} holds a {MANIFEST} that is not a meteora-edge index; {refuse}")
    strangers = [name for name in names if not (
        _is_pointer_tmp(name)
        or (name == WRITER_LOCK and _is_empty_file(root / name))
        or (GENERATION_NAME.fullmatch(name) and _written_here(root / name))
    )]
    if strangers:
        more = f" and {len(strangers) - 1} more" if len(strangers) > 1 else ""
        raise InputError(f"{root} is a folder that is not a meteora-edge index (it holds {strangers[0]!r}{more}); "
                         f"{refuse}")
    return "free"


def lock_timeout(seconds: float | None = None) -> float:
    """How long a writer waits for the lock: ``seconds``, else ``$METEORA_EDGE_LOCK_TIMEOUT``, else 60.

    Raises:
        ConfigError: a negative, infinite or non-numeric value.
    """
    where = "lock_timeout"
    if seconds is None:
        raw = os.environ.get(LOCK_TIMEOUT_ENV, "").strip()
        if not raw:
            return DEFAULT_LOCK_TIMEOUT
        where = LOCK_TIMEOUT_ENV
        try:
            seconds = float(raw)
        except ValueError:
            raise ConfigError(f"{LOCK_TIMEOUT_ENV} must be a number of seconds, got {raw!r:.40}") from None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
        raise ConfigError(f"{where} must be a number of seconds >= 0, got {seconds!r:.40}")
    return float(seconds)


@contextmanager
def writer_lock(root: Path, *, create: bool, timeout: float | None = None) -> Iterator[None]:
    """Hold the writer lock of the index at ``root`` (waiting for another writer to finish).

    Args:
        root: the index folder.
        create: create the folder (and its parents) when it does not exist.
        timeout: seconds to wait for another writer (see :func:`lock_timeout`).

    Raises:
        LocalIndexError: the folder is missing (without ``create``), it or its lock file
            cannot be created or opened, or another writer held the lock past ``timeout``.
        ConfigError: a bad ``timeout``.
    """
    wait = lock_timeout(timeout)
    if not create and not root.is_dir():  # the lock file would recreate a removed index folder
        raise LocalIndexError(f"index folder not found: {root}; build one with 'meteora-edge index build'")
    try:
        if create and not root.exists():
            # owner-only: the folder is the gate (the files inside follow the umask), so an index
            # of someone's documents is not readable by other local users unless they open it up
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            _fsync_folder(root.parent)
        lock = FileLock(str(root / WRITER_LOCK))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            logger.info("waiting up to %g s for another writer of %s", wait, root)
            try:
                lock.acquire(timeout=wait)
            except Timeout:
                raise LocalIndexError(
                    f"another writer has held the lock of {root} for {wait:g} s; try again once it has finished "
                    f"(lock_timeout, or {LOCK_TIMEOUT_ENV}, sets how long to wait)") from None
    except OSError as exc:
        raise LocalIndexError(f"cannot write the index at {root}: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        lock.release()


class _HashingFile:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        self.raw.write(data)
        self.digest.update(data)
        self.size += memoryview(data).nbytes
        return memoryview(data).nbytes


class GenerationWriter:
    """Writes the files of one new generation folder, each hashed as written (and fsynced before the switch)."""

    def __init__(self, root: Path, after: str | None) -> None:
        match = GENERATION_NAME.fullmatch(after) if after else None
        sequence = int(match.group(1)) + 1 if match else 1
        self.root = root
        self.name = f"gen-{sequence:06d}-{secrets.token_hex(4)}"
        self.folder = root / self.name
        self.files: dict[str, dict[str, Any]] = {}
        #: the files written (not linked) into this generation, fsynced together before the switch
        self.unsynced: list[Path] = []
        self.folder.mkdir()
        try:  # the marker first: it is what lets a later writer remove this folder if we are killed
            with open(self.folder / GENERATION_MARKER, "xb") as marker:
                marker.write(_marker_bytes(self.name))
                marker.flush()
                os.fsync(marker.fileno())
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    @contextmanager
    def stream(self, name: str) -> Iterator[_HashingFile]:
        """Write the file ``name`` through the yielded object; it is listed on exit (and fsynced with the
        rest before the switch, see :func:`new_generation`)."""
        with open(self.folder / name, "xb") as raw:
            out = _HashingFile(raw)
            yield out
        self.files[name] = {"sha256": out.digest.hexdigest(), "size": out.size}
        self.unsynced.append(self.folder / name)

    def write_array(self, name: str, array: np.ndarray) -> None:
        with self.stream(name) as out:
            np.save(out, array, allow_pickle=False)

    def write_bytes(self, name: str, data: bytes) -> None:
        with self.stream(name) as out:
            out.write(data)

    def link(self, name: str, source: Path, entry: dict[str, Any]) -> None:
        """Carry the unchanged file ``source`` (of the live generation) into this one as ``name``.

        A hard link costs nothing whatever the file's size, and the old generation's removal leaves
        the data in place; where links are refused (some network or FAT file systems) the file is copied.
        ``entry`` is its recorded size and sha256, kept as they are.
        """
        target = self.folder / name
        try:
            info = os.lstat(source)
        except OSError as exc:
            raise LocalIndexError(f"cannot read {source} ({exc.strerror or exc}); rebuild the index") from None
        if not stat.S_ISREG(info.st_mode):
            raise LocalIndexError(f"{source} is not a regular file; rebuild the index")
        if info.st_size != entry["size"]:
            raise LocalIndexError(f"{source} has the wrong size (truncated or replaced); rebuild the index")
        try:
            os.link(source, target)
        except OSError:
            with open(source, "rb") as raw, self.stream(name) as out:
                shutil.copyfileobj(raw, out)  # type: ignore[misc]
            if self.files[name] != entry:
                raise LocalIndexError(f"{source} changed while it was copied; the index there is unchanged")
            return
        self.files[name] = dict(entry)

    def finish(self, manifest: dict[str, Any]) -> None:
        """Write the generation's manifest (with the file list); :func:`new_generation` fsyncs it all."""
        missing = sorted(set(generation_files(manifest)) - set(self.files))
        if missing:
            raise RuntimeError(f"generation is missing {missing}")  # a bug here, not a user error
        self.write_bytes(MANIFEST, _json_bytes({**manifest, "files": self.files}))


def _is_empty_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def _json_bytes(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def _live_generation(root: Path) -> str | None:
    """The generation the pointer names; None without a pointer, or with a format-1 or damaged one.

    Raises:
        OSError: the pointer exists but cannot be read (then nothing may be removed).
    """
    try:
        data = parse_strict_json(read_small_file(root / MANIFEST), str(root / MANIFEST))
    except FileNotFoundError:
        return None
    except LocalIndexError:  # unreadable JSON: only 'build --overwrite' of a damaged index gets here
        return None
    try:
        return check_pointer(data, str(root / MANIFEST))
    except LocalIndexError:  # a format-1 manifest (no generation) or a damaged pointer
        return None


def live_generation(root: Path) -> str | None:
    """The generation the pointer of ``root`` names now (None: format 1, no pointer, or unreadable)."""
    try:
        return _live_generation(root)
    except OSError:
        return None


def _remove_leftovers(root: Path) -> None:
    """Remove the generations this index wrote that the pointer does not name, pointer temporaries,
    old top-level files; a folder merely named like a generation stays."""
    live = _live_generation(root)
    for name in os.listdir(root):
        path = root / name
        if GENERATION_NAME.fullmatch(name) and name != live:
            if _written_here(path, legacy=live is not None):
                shutil.rmtree(path, ignore_errors=True)
            else:
                logger.warning("%s is named like a generation but this index did not write it; left in place", path)
        elif _is_pointer_tmp(name) or (
            live is not None and name in REQUIRED_FILES  # format-1 files once a generation is live
        ):
            path.unlink(missing_ok=True)


def _names(root: Path, generation: str) -> bool:
    """Whether the pointer names ``generation`` (an unreadable pointer counts as yes: keep it)."""
    try:
        return _live_generation(root) == generation
    except OSError:
        return True


def _publish(root: Path, writer: GenerationWriter) -> None:
    """Point the index at the writer's generation: write a temporary pointer, fsync it with every file
    and folder of the generation (and the index folder, which lists the generation), replace atomically."""
    fd, tmp = tempfile.mkstemp(dir=root, prefix=_POINTER_TMP[0], suffix=_POINTER_TMP[1])
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(_json_bytes({"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION,
                                      "generation": writer.name}))
        give_normal_permissions(tmp)
        fsync_together([*writer.unsynced, Path(tmp)], [writer.folder, root])
        os.replace(tmp, root / MANIFEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def new_generation(root: Path) -> Iterator[GenerationWriter]:
    """Under the writer lock: clean leftovers, yield a writer, publish its generation on success.

    Whatever fails before the pointer moves (a full disk, a read-only folder, an
    exception, an interrupt) removes the half-written generation and leaves the index as
    it was. After the switch the superseded generation is removed; readers that opened it
    keep reading it through their open descriptors.

    Raises:
        LocalIndexError: an OSError while writing (the message says the index is unchanged).
    """
    writer = None
    try:
        _remove_leftovers(root)
        writer = GenerationWriter(root, _live_generation(root))
        yield writer
        _publish(root, writer)  # the switch: before it the old version is live, after it the new one
    except BaseException as exc:
        if writer is not None and not _names(root, writer.name):  # an interrupt may land just after the switch
            shutil.rmtree(writer.folder, ignore_errors=True)
        if isinstance(exc, OSError):
            raise LocalIndexError(f"cannot write the index at {root}: {exc.strerror or exc}; "
                                  "the index there is unchanged") from None
        raise
    try:
        _fsync_folder(root)  # makes the switch durable
        _remove_leftovers(root)
    except OSError as exc:  # the new version is live either way; leftovers go with the next write
        logger.warning("after switching %s to %s: %s", root, writer.name, exc)
