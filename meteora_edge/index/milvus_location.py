"""Where a Milvus index lives, and the one place that connects to it (extra ``[milvus]``).

Two kinds of location, one code path (pymilvus's ``MilvusClient``):

* **Milvus Lite** — a local database folder whose name ends in ``.db`` (pymilvus's rule),
  e.g. ``./corpus.db``; the ``milvus-lite`` package runs the engine inside this process.
  One process at a time may open a Lite database (it holds a file lock): :func:`connect` waits
  for another process to let it go (``METEORA_EDGE_LOCK_TIMEOUT`` seconds, 60 by default, as a
  local index's writer lock), saying so once in the log, then fails in one line. Concurrent
  writers and readers (``index sync`` while ``serve`` runs) need a Milvus server.
* **A Milvus server or cluster** — ``http://host:19530`` (or ``https://…``), optionally with a
  user and a database: ``http://reader@host:19530/notes``. The secret never appears in a URI,
  a log or a message: a token (an API key, or ``user:password``) comes from
  ``METEORA_EDGE_MILVUS_TOKEN``, a user's password from ``METEORA_EDGE_MILVUS_PASSWORD``.

``select --index`` names an index by one string, a ``milvus://`` URL:
``milvus://./corpus.db`` or ``milvus:///abs/corpus.db`` (Lite: the part after ``milvus://``
ends in ``.db``), ``milvus://host:19530`` (a server over http), ``milvus+https://host:443``
(over https), ``milvus://USER@host:19530/DATABASE`` (a user and a database on a server);
``?collection=NAME`` picks the collection. The default collection is the
database's file name without ``.db`` (``corpus``) for Lite, and ``meteora_edge`` on a server.

pymilvus logs every failed call with a traceback on its own stderr handler (logger
``pymilvus``); the CLI quiets it, a library caller may do the same.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from ..errors import CollectionError, InputError, MissingExtraError
from .generations import LOCK_TIMEOUT_ENV, lock_timeout

__all__ = [
    "DEFAULT_COLLECTION", "MilvusLocation", "connect", "is_milvus_url", "lite_in_use", "milvus_error",
    "milvus_location", "parse_milvus_url",
]

DEFAULT_COLLECTION = "meteora_edge"
_LITE_LOCK = "LOCK"  # the file Milvus Lite holds an exclusive flock on while a process has the database open
_POLL = 0.2  # seconds between two looks at a Lite database another process holds

logger = logging.getLogger(__name__)
TOKEN_ENV = "METEORA_EDGE_MILVUS_TOKEN"
PASSWORD_ENV = "METEORA_EDGE_MILVUS_PASSWORD"
#: ``[USER@]HOST:PORT[/DATABASE]`` after the scheme of a server URI
_SERVER = re.compile(r"(?:(?P<user>[A-Za-z0-9_.\-]{1,128})@)?(?P<host>(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):\d{1,5})"
                     r"(?:/(?P<db>[A-Za-z_][A-Za-z0-9_]{0,254})?)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_SCHEMES = {"milvus": "http", "milvus+http": "http", "milvus+https": "https"}
_FORMS = ("milvus://PATH.db (Milvus Lite), milvus://HOST:PORT or milvus+https://HOST:PORT (a server), "
          "each with an optional ?collection=NAME")


@dataclass(frozen=True)
class MilvusLocation:
    """A collection on Milvus: ``uri`` is what pymilvus connects to (a ``.db`` path or http(s)://host:port)."""

    uri: str
    collection: str
    #: on a server: the database (empty: the server's default) and the user (empty: a token or none)
    db_name: str = ""
    user: str = ""

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.collection):
            raise InputError(f"Milvus collection name {self.collection!r} is not valid: use letters, digits and "
                             "underscores, starting with a letter or underscore (at most 255)")

    @property
    def lite(self) -> bool:
        return not self.uri.startswith(("http://", "https://"))

    @property
    def label(self) -> str:
        """The ``milvus://`` URL that names this collection (for messages and ``index info``)."""
        if self.lite:
            return f"milvus://{self.uri}?collection={self.collection}"
        scheme, rest = self.uri.split("://", 1)
        user = f"{self.user}@" if self.user else ""
        db = f"/{self.db_name}" if self.db_name else ""
        return f"{'milvus' if scheme == 'http' else 'milvus+https'}://{user}{rest}{db}?collection={self.collection}"


def is_milvus_url(text: str) -> bool:
    """Whether ``text`` is a ``milvus://`` (or ``milvus+http(s)://``) URL rather than a folder."""
    return text.split("://", 1)[0].lower() in _SCHEMES and "://" in text


def _default_collection(uri: str) -> str:
    if uri.startswith(("http://", "https://")):
        return DEFAULT_COLLECTION
    stem = re.sub(r"\W", "_", Path(uri).name[: -len(".db")], flags=re.ASCII) or DEFAULT_COLLECTION
    return stem if _NAME.fullmatch(stem) else f"c_{stem}"[:255]


def milvus_location(uri: str, collection: str | None = None) -> MilvusLocation:
    """A location from ``--uri`` (a ``.db`` path, or http(s)://host:port) and ``--collection``.

    Raises:
        InputError: any other URI, or a collection name Milvus would refuse.
    """
    text = uri.strip()
    if text.lower().startswith(("http://", "https://")):
        scheme, rest = text.split("://", 1)
        if ":" in rest.split("@", 1)[0] and "@" in rest:  # USER:PASSWORD@: never echo the URI
            raise InputError(f"a Milvus server URI must not hold a password; give USER@HOST:PORT and set "
                             f"{PASSWORD_ENV} (or {TOKEN_ENV})")
        server = _SERVER.fullmatch(rest.rstrip("/") if rest.count("/") > 1 or rest.endswith("/") else rest)
        if not server:
            raise InputError(f"Milvus server URI {uri!r} must be {scheme.lower()}://[USER@]HOST:PORT[/DATABASE], "
                             "e.g. http://localhost:19530")
        text = f"{scheme.lower()}://{server.group('host')}"
        return MilvusLocation(text, collection or DEFAULT_COLLECTION, server.group("db") or "",
                              server.group("user") or "")
    elif "://" in text:
        raise InputError(f"Milvus URI {uri!r}: give a Milvus Lite path ending in .db or http(s)://HOST:PORT")
    elif not text.endswith(".db") or text in (".db", "/.db") or text.endswith("/.db"):
        raise InputError(f"Milvus Lite database {uri!r} must be a path whose name ends in .db (e.g. ./corpus.db)")
    return MilvusLocation(text, collection or _default_collection(text))


def parse_milvus_url(url: str) -> MilvusLocation:
    """A location from a ``milvus://`` URL (see the module docstring for the forms).

    Raises:
        InputError: another scheme, neither a ``.db`` path nor HOST:PORT, or a bad ``?`` part.
    """
    scheme, _, rest = url.partition("://")
    if scheme.lower() not in _SCHEMES or not rest:
        raise InputError(f"{url!r} is not a Milvus URL; give {_FORMS}")
    target, _, query = rest.partition("?")
    params = parse_qs(query, keep_blank_values=True, strict_parsing=False) if query else {}
    if set(params) - {"collection"} or any(len(v) != 1 for v in params.values()):
        raise InputError(f"{url!r}: the only option a Milvus URL takes is ?collection=NAME")
    collection = params["collection"][0] if params else None
    if target.endswith(".db") and scheme.lower() == "milvus":
        return milvus_location(os.path.expanduser(target), collection)
    if "@" in target or _SERVER.fullmatch(target.rstrip("/")):
        return milvus_location(f"{_SCHEMES[scheme.lower()]}://{target}", collection)
    raise InputError(f"{url!r} names neither a Milvus Lite database (a path ending in .db) nor a server "
                     f"(HOST:PORT); give {_FORMS}")


def _message(exc: Exception) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return " ".join(str(text).split())[:300]


def connect(location: MilvusLocation, *, timeout: float = 10.0, wait: float | None = None) -> Any:
    """A ``MilvusClient`` for ``location`` (starting Milvus Lite in this process for a ``.db`` path).

    Args:
        location: where the index lives.
        timeout: seconds each call to the server may take.
        wait: seconds to wait for another process that has the Lite database open (None:
            ``METEORA_EDGE_LOCK_TIMEOUT``, else 60).

    Raises:
        MissingExtraError: pymilvus (or, for a ``.db`` path, milvus-lite) is not installed.
        InputError: the Lite database's folder does not exist, or the path is a file.
        CollectionError: the server cannot be reached, the database cannot be opened, or another
            process kept the Lite database open for ``wait`` seconds.
        ConfigError: a bad ``wait`` (or ``METEORA_EDGE_LOCK_TIMEOUT``).
    """
    try:
        from pymilvus import MilvusClient
        from pymilvus.exceptions import MilvusException
    except ImportError:
        raise MissingExtraError("pymilvus", "milvus") from None
    if location.lite:
        try:
            import milvus_lite  # noqa: F401  (pymilvus starts it for .db paths)
        except ImportError:
            raise MissingExtraError("milvus-lite", "milvus") from None
        path = Path(location.uri)
        if not path.parent.is_dir():
            raise InputError(f"folder {path.parent} does not exist (for the Milvus Lite database {path})")
        if path.exists() and not path.is_dir():
            raise InputError(f"{path} is a file, not a Milvus Lite database folder (databases of milvus-lite 2.x "
                             "cannot be opened; rebuild the index)")
    secrets = {"token": os.environ.get(TOKEN_ENV, "")}
    if not location.lite:
        secrets.update(user=location.user, password=os.environ.get(PASSWORD_ENV, "") if location.user else "",
                       db_name=location.db_name)
    new_database = location.lite and not Path(location.uri).exists()
    patience = lock_timeout(wait) if location.lite else 0.0
    give_up = time.monotonic() + patience
    waited = False
    while True:
        try:
            client = MilvusClient(uri=location.uri, timeout=timeout, **secrets)
            if new_database and Path(location.uri).is_dir():
                os.chmod(location.uri, 0o700)  # owner-only, as a local index: it holds the user's documents
            return client
        except MilvusException as exc:
            if not location.lite:
                raise CollectionError(f"cannot connect to Milvus at {location.uri}: {_message(exc)}") from None
            if not lite_in_use(location.uri):
                raise CollectionError(f"cannot open the Milvus Lite database {location.uri} ({_message(exc)}); is "
                                      "another process using it? Milvus Lite lets one process open a database") from None
            if time.monotonic() >= give_up:
                raise CollectionError(
                    f"another process has kept the Milvus Lite database {location.uri} open for {patience:g} s "
                    f"({LOCK_TIMEOUT_ENV} sets how long to wait): Milvus Lite lets one process open a database, so "
                    "stop that process (a running 'meteora-edge serve' holds it), or use a Milvus server "
                    "(--uri http://HOST:19530), which takes concurrent writers and readers") from None
        if not waited:
            waited = True
            logger.warning("waiting up to %g s for the Milvus Lite database %s: another process has it open "
                           "(Milvus Lite lets one process open a database)", patience, location.uri)
        while lite_in_use(location.uri) and time.monotonic() < give_up:
            time.sleep(_POLL)


def lite_in_use(path: str | os.PathLike[str]) -> bool:
    """Whether another process holds the lock of the Milvus Lite database folder ``path`` (a probe of
    Milvus Lite's own lock file; this process's own hold counts too, so ask only after an open failed)."""
    lock = Path(path) / _LITE_LOCK
    if sys.platform == "win32" or not lock.is_file():
        return False
    import fcntl

    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def milvus_error(exc: Exception) -> str:
    """One line from a pymilvus exception: its message without the code wrapper."""
    return _message(exc)
