"""A persistent embedding cache: passages seen before are not embedded again.

A retriever hands the same corpus chunks to the selector query after query; embedding them
is nearly all of a selection's time. The cache keeps each vector under
``(encoder key, sha256 of the text)`` in one SQLite file (the standard library's
``sqlite3``: write-ahead log, a busy timeout, one transaction per batch), so several
processes can share it and an interrupted write never leaves half an entry.

* **Never trusted blindly.** Each row carries a checksum over the encoder key, the text's
  hash, the dimension and the vector bytes; a row whose checksum, size, dimension or values
  do not add up (a corrupt page, a row copied from another encoder) is ignored, recomputed
  and overwritten. A file that is not a database at all is replaced by a new one.
* **Bounded.** When the live pages pass ``max_bytes`` the least recently used rows are
  deleted down to 90 % of it (freed pages are reused, so the file stays near the bound).
  A hit refreshes its row's time at most once a minute, so a warm lookup writes nothing.
* **Never in the way.** A locked, full, read-only or missing folder only costs speed: the
  error is logged and the caller's vectors are computed as if there were no cache.

* **Private.** The vectors are derived from the user's documents (and embeddings can be
  inverted to recover text), so the folder is made ``0700`` and the files ``0600``; looser
  modes found on open are tightened, and a folder or file owned by another user is not used.

Where it lives (:func:`default_cache_dir`): ``$METEORA_EDGE_CACHE`` (a folder, or ``off``),
else ``$XDG_CACHE_HOME/meteora-edge``, else ``~/.cache/meteora-edge``; the file is
``embeddings.sqlite3``. ``$METEORA_EDGE_CACHE_MAX_MB`` sets the bound (default 256).
The library caches only when asked (an encoder's ``cache=`` argument, or
``$METEORA_EDGE_CACHE`` naming a folder or ``on``, see :func:`cache_wanted_by_env`); the
command line and ``serve`` cache by default (``--no-cache`` or ``METEORA_EDGE_CACHE=off``
turn it off; ``meteora-edge cache info|clear`` shows and empties it).

Example:
    >>> import shutil, tempfile, numpy as np
    >>> cache = EmbeddingCache(tempfile.mkdtemp())
    >>> key = text_digest("Either party may terminate.")
    >>> cache.store("my-encoder", {key: np.ones(4, dtype=np.float32)})
    >>> cache.lookup("my-encoder", [key], dimension=4)[key].tolist()
    [1.0, 1.0, 1.0, 1.0]
    >>> cache.close(); shutil.rmtree(cache.folder)
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = [
    "EmbeddingCache",
    "CACHE_ENV",
    "CACHE_SIZE_ENV",
    "CACHE_FILE",
    "DEFAULT_MAX_BYTES",
    "default_cache_dir",
    "default_cache",
    "cache_wanted_by_env",
    "text_digest",
]

logger = logging.getLogger(__name__)

CACHE_ENV = "METEORA_EDGE_CACHE"
CACHE_SIZE_ENV = "METEORA_EDGE_CACHE_MAX_MB"
CACHE_FILE = "embeddings.sqlite3"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
_OFF = {"off", "0", "false", "no", "none"}
_ON = {"on", "1", "true", "yes"}  # the default folder, asked for by the environment
_FOLDER_MODE = 0o700
_FILE_MODE = 0o600
_FILE_SUFFIXES = ("", "-wal", "-shm")
_TABLE = "vectors_v1"  # a later layout gets its own table; both can share the file
_TOUCH_AFTER_US = 60_000_000  # a hit refreshes its row's use time at most once a minute
_SQL_VARS = 500  # rows per SELECT ... IN (...), under SQLite's variable limit
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    encoder   TEXT    NOT NULL,
    digest    BLOB    NOT NULL,
    dimension INTEGER NOT NULL,
    vector    BLOB    NOT NULL,
    checksum  BLOB    NOT NULL,
    last_used INTEGER NOT NULL,  -- microseconds since the epoch
    PRIMARY KEY (encoder, digest)
);
CREATE INDEX IF NOT EXISTS {_TABLE}_last_used ON {_TABLE} (last_used);
"""


def text_digest(text: str) -> bytes:
    """The 32-byte sha256 of a text's UTF-8 bytes (lone surrogates kept as they are)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _checksum(encoder: str, digest: bytes, dimension: int, vector: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in (encoder.encode("utf-8"), digest, dimension.to_bytes(4, "little"), vector):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, taken at once (``BEGIN IMMEDIATE``) and rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def default_cache_dir() -> Path | None:
    """The cache folder the environment asks for, or None when ``METEORA_EDGE_CACHE=off`` (or
    there is no home directory to put it in)."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting.lower() in _OFF:
        return None
    if setting and setting.lower() not in _ON:
        return Path(setting).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "meteora-edge"
    try:
        return Path.home() / ".cache" / "meteora-edge"
    except RuntimeError:  # no home directory at all: run without a cache
        logger.info("no home directory and no %s: the embedding cache is off", CACHE_ENV)
        return None


def cache_wanted_by_env() -> bool:
    """Whether ``$METEORA_EDGE_CACHE`` asks the library for the cache (a folder, or ``on``).

    Unset or ``off``: no. The library's encoders cache only when asked, by this or by their
    ``cache=`` argument; the command line asks unless ``--no-cache``.
    """
    setting = os.environ.get(CACHE_ENV, "").strip()
    return bool(setting) and setting.lower() not in _OFF


def _private(path: Path, mode: int) -> None:
    """Make ``path`` (ours) no more open than ``mode``; refuse one owned by another user.

    Raises:
        OSError: ``path`` belongs to another user, or its mode cannot be changed.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(f"{path} is a symbolic link; the cache keeps its files in a real folder")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise OSError(f"{path} belongs to another user (uid {st.st_uid})")
    if stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
        logger.info("embedding cache: tightened %s to %o", path, stat.S_IMODE(st.st_mode) & mode)


def _max_bytes_from_env() -> int:
    raw = os.environ.get(CACHE_SIZE_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        megabytes = float(raw)
    except ValueError:
        raise ConfigError(f"{CACHE_SIZE_ENV}={raw!r} is not a number of megabytes; e.g. {CACHE_SIZE_ENV}=256") from None
    if not megabytes >= 1:
        raise ConfigError(f"{CACHE_SIZE_ENV}={raw!r} must be at least 1 (megabytes)")
    return int(megabytes * 1024 * 1024)


_SHARED: dict[tuple[str, int], EmbeddingCache] = {}
_SHARED_LOCK = threading.Lock()


def default_cache() -> EmbeddingCache | None:
    """The process-wide cache in :func:`default_cache_dir` (one per folder), or None when off.

    Raises:
        ConfigError: ``METEORA_EDGE_CACHE_MAX_MB`` is not a number ≥ 1.
    """
    folder = default_cache_dir()
    if folder is None:
        return None
    max_bytes = _max_bytes_from_env()
    key = (str(folder.resolve()), max_bytes)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = EmbeddingCache(folder, max_bytes=max_bytes)
        return _SHARED[key]


class EmbeddingCache:
    """Vectors on disk, keyed by ``(encoder key, text digest)``; safe to share between processes.

    Args:
        folder: where ``embeddings.sqlite3`` lives (created on first write).
        max_bytes: bound on the live database pages (least recently used rows go first).
        timeout: seconds to wait for another process's write lock before giving up on a write.

    Raises:
        ConfigError: ``max_bytes`` below 64 KiB or a non-positive ``timeout``.
    """

    def __init__(self, folder: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 timeout: float = 5.0) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 65536:
            raise ConfigError(f"max_bytes must be an integer of at least 65536, got {max_bytes!r}")
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.folder = Path(folder)
        self.path = self.folder / CACHE_FILE
        self.max_bytes = max_bytes
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._disabled = False

    # -- connection ----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection | None:
        """The open connection (reopened after a fork), or None when the cache is unusable."""
        if self._disabled:
            return None
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            self._conn = self._open()
        except sqlite3.DatabaseError as exc:
            logger.warning("embedding cache %s is not a usable database (%s); starting a new one", self.path, exc)
            self._conn = self._replace_corrupt_file()
        except OSError as exc:
            logger.warning("embedding cache disabled: cannot use %s (%s)", self.folder, exc)
            self._conn = None
        self._pid = os.getpid()
        self._disabled = self._conn is None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.folder.mkdir(parents=True, exist_ok=True, mode=_FOLDER_MODE)
        _private(self.folder, _FOLDER_MODE)
        # create the file 0600 before SQLite does (it gives its -wal and -shm the same mode)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), _FILE_MODE))
        self._tighten_files()
        conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA journal_size_limit = {16 * 1024 * 1024}")
            conn.executescript(_SCHEMA)
            self._tighten_files()
        except (sqlite3.Error, OSError):
            conn.close()
            raise
        return conn

    def _tighten_files(self) -> None:
        for suffix in _FILE_SUFFIXES:
            path = Path(f"{self.path}{suffix}")
            if os.path.lexists(path):
                _private(path, _FILE_MODE)

    def _replace_corrupt_file(self) -> sqlite3.Connection | None:
        try:
            for suffix in _FILE_SUFFIXES:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            return self._open()
        except (OSError, sqlite3.Error) as exc:
            logger.warning("embedding cache disabled: cannot recreate %s (%s)", self.path, exc)
            return None

    def _failed(self, action: str, exc: Exception) -> None:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            logger.info("embedding cache %s busy; %s skipped", self.path, action)
            return
        logger.warning("embedding cache %s: %s failed (%s); continuing without it", self.path, action, exc)
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            self._close_unlocked()
            self._conn = self._replace_corrupt_file()
            self._pid = os.getpid()
            self._disabled = self._conn is None

    def close(self) -> None:
        """Close the connection (a later call reopens it)."""
        with self._lock:
            self._close_unlocked()

    def _close_unlocked(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None

    # -- reading and writing -------------------------------------------------------------

    def lookup(self, encoder: str, digests: Iterable[bytes], *, dimension: int) -> dict[bytes, np.ndarray]:
        """The cached vectors of ``digests`` that pass every check (missing ones are absent).

        Args:
            encoder: the encoder key (see :attr:`OnnxEncoder.cache_key`).
            digests: :func:`text_digest` values.
            dimension: the vector size the caller expects; other sizes are ignored.

        Returns:
            digest → float32 vector (a fresh, writable array).
        """
        wanted = list(dict.fromkeys(digests))
        found: dict[bytes, np.ndarray] = {}
        if not wanted:
            return found
        now = time.time_ns() // 1000
        with self._lock:
            conn = self._connect()
            if conn is None:
                return found
            try:
                stale: list[bytes] = []
                for start in range(0, len(wanted), _SQL_VARS):
                    part = wanted[start : start + _SQL_VARS]
                    rows = conn.execute(
                        f"SELECT digest, dimension, vector, checksum, last_used FROM {_TABLE} "
                        f"WHERE encoder = ? AND digest IN ({','.join('?' * len(part))})",
                        [encoder, *part],
                    ).fetchall()
                    for digest, dim, blob, checksum, last_used in rows:
                        vector = self._valid(encoder, digest, dim, blob, checksum, dimension)
                        if vector is None:
                            logger.info("embedding cache %s: ignoring a corrupt or foreign entry", self.path)
                            continue
                        found[bytes(digest)] = vector
                        if now - int(last_used) > _TOUCH_AFTER_US:
                            stale.append(bytes(digest))
            except sqlite3.Error as exc:
                self._failed("lookup", exc)
                return {}
            if stale:
                try:
                    with _transaction(conn):
                        conn.executemany(f"UPDATE {_TABLE} SET last_used = ? WHERE encoder = ? AND digest = ?",
                                         [(now, encoder, d) for d in stale])
                except sqlite3.Error as exc:
                    self._failed("refreshing the use times", exc)
        return found

    @staticmethod
    def _valid(encoder: str, digest: Any, dim: Any, blob: Any, checksum: Any, dimension: int) -> np.ndarray | None:
        if not isinstance(digest, bytes) or not isinstance(blob, bytes) or not isinstance(checksum, bytes):
            return None
        if not isinstance(dim, int) or dim != dimension or len(blob) != 4 * dim or len(digest) != 32:
            return None
        if checksum != _checksum(encoder, digest, dim, blob):
            return None
        vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return vector if np.isfinite(vector).all() else None

    def store(self, encoder: str, vectors: Mapping[bytes, np.ndarray]) -> None:
        """Save ``digest → vector`` (replacing what was there), then keep the file under its bound.

        Nothing is raised: a failure is logged and the vectors are simply not cached.
        """
        if not vectors:
            return
        now = time.time_ns() // 1000
        rows = []
        for digest, vector in vectors.items():
            array = np.ascontiguousarray(vector, dtype="<f4").reshape(-1)
            if not np.isfinite(array).all():
                continue
            blob = array.tobytes()
            rows.append((encoder, digest, int(array.size), blob, _checksum(encoder, digest, int(array.size), blob), now))
        with self._lock:
            conn = self._connect()
            if conn is None:
                return
            try:
                with _transaction(conn):
                    conn.executemany(f"INSERT OR REPLACE INTO {_TABLE} VALUES (?, ?, ?, ?, ?, ?)", rows)
                    self._evict(conn)
            except sqlite3.Error as exc:
                self._failed("store", exc)

    def _used_bytes(self, conn: sqlite3.Connection) -> int:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int(pages * page_size)

    def _evict(self, conn: sqlite3.Connection) -> None:
        """Delete least recently used rows until the live pages are under 90 % of the bound."""
        used = self._used_bytes(conn)
        if used <= self.max_bytes:
            return
        target = int(self.max_bytes * 0.9)
        for _ in range(8):  # each round frees about what is needed; a few rounds absorb page slack
            count = conn.execute(f"SELECT count(*) FROM {_TABLE}").fetchone()[0]
            if not count or used <= target:
                break
            per_row = used / count
            doomed = min(count, max(1, math.ceil((used - target) / per_row)))
            conn.execute(f"DELETE FROM {_TABLE} WHERE rowid IN "
                         f"(SELECT rowid FROM {_TABLE} ORDER BY last_used, rowid LIMIT ?)", (doomed,))
            used = self._used_bytes(conn)
        logger.debug("embedding cache %s evicted down to %d bytes", self.path, used)

    # -- housekeeping --------------------------------------------------------------------

    def permissions(self) -> dict[str, str]:
        """The octal mode of the folder and of each file that exists (``doctor`` and ``cache info``)."""
        modes = {}
        for path in (self.folder, *(Path(f"{self.path}{s}") for s in _FILE_SUFFIXES)):
            try:
                modes[path.name] = format(stat.S_IMODE(os.lstat(path).st_mode), "04o")
            except OSError:
                continue
        return modes

    def disk_bytes(self) -> int:
        """Bytes the cache's files take on disk (the database, its write-ahead log and index)."""
        total = 0
        for suffix in _FILE_SUFFIXES:
            try:
                total += os.lstat(f"{self.path}{suffix}").st_size
            except OSError:
                continue
        return total

    def stats(self) -> dict[str, Any]:
        """Where the cache is, its permissions, how many vectors it holds and how big it is (for
        ``doctor`` and ``cache info``)."""
        out: dict[str, Any] = {"path": str(self.path), "max_mb": round(self.max_bytes / 2**20, 1),
                               "permissions": self.permissions()}
        if not self.path.exists():
            return {**out, "entries": 0, "used_mb": 0.0, "disk_mb": 0.0, "state": "not created yet"}
        with self._lock:
            conn = self._connect()
            if conn is None:
                return {**out, "state": "unusable (see the log)"}
            try:
                entries = conn.execute(f"SELECT count(*) FROM {_TABLE}").fetchone()[0]
                used = self._used_bytes(conn)
            except sqlite3.Error as exc:
                self._failed("stats", exc)
                return {**out, "state": f"unreadable ({exc})"}
        return {**out, "permissions": self.permissions(), "entries": int(entries), "used_mb": round(used / 2**20, 2),
                "disk_mb": round(self.disk_bytes() / 2**20, 2), "state": "ok"}

    def clear(self) -> int:
        """Delete every cached vector and give the space back; returns how many were deleted.

        Raises:
            ConfigError: the cache cannot be opened or written (so nothing was deleted).
        """
        with self._lock:
            conn = self._connect()
            if conn is None:
                raise ConfigError(f"cannot open the embedding cache {self.path} (see the log)")
            try:
                count = conn.execute(f"SELECT count(*) FROM {_TABLE}").fetchone()[0]
                conn.execute(f"DELETE FROM {_TABLE}")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot clear the embedding cache {self.path}: {exc}") from None
        return int(count)

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.folder)!r}, max_bytes={self.max_bytes})"
