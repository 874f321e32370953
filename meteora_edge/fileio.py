"""Reading the CLI's input files and writing outputs atomically.

Readers turn every problem (missing file, bad encoding, malformed JSON, wrong shape)
into one :class:`InputError` naming the file and the fix. They open only regular files
(a FIFO or ``/dev/zero`` is refused, never waited on) and enforce the size cap while
reading. Writers never leave a half file: they write a temporary file beside the target,
fsync it and rename it into place; a full disk or a read-only folder is one error.

The path ``-`` (:data:`STDIN`) reads standard input instead, under the same size cap; messages
name it ``<stdin>``.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO

from .errors import InputError

__all__ = [
    "read_bytes",
    "read_text_file",
    "iter_text_blocks",
    "parse_json",
    "read_chunks_file",
    "read_json_file",
    "read_json_or_jsonl",
    "parse_json_or_jsonl",
    "JsonLines",
    "atomic_path",
    "open_atomic",
    "read_json_source",
    "write_text_atomic",
    "give_normal_permissions",
    "MAX_INPUT_BYTES",
    "STDIN",
    "STDIN_LABEL",
    "is_stdin",
    "source_name",
    "escape_line_separators",
    "loads_json",
    "DuplicateKeyError",
    "RealPaths",
]

MAX_INPUT_BYTES = 512 * 1024 * 1024
_BLOCK = 1 << 20
STDIN = "-"
STDIN_LABEL = "<stdin>"
_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029"})


def escape_line_separators(text: str) -> str:
    """JSON text with U+2028 and U+2029 written as ``\\u2028``/``\\u2029``: still the same JSON (they can
    only occur inside strings), but one line for a reader that splits on every Unicode line break
    (``str.splitlines``, JavaScript before ES2019). Every JSON and JSON-lines output goes through it.

    Example:
        >>> escape_line_separators(json.dumps({"text": "a\u2028b"}, ensure_ascii=False))
        '{"text": "a\\\\u2028b"}'
    """
    return text.translate(_SEPARATORS)


def is_stdin(path: object) -> bool:
    """Whether ``path`` is ``-``, standard input."""
    return isinstance(path, str) and path == STDIN


def source_name(path: str | os.PathLike[str]) -> str:
    """How messages and records name an input: ``<stdin>`` for ``-``, else the path."""
    return STDIN_LABEL if is_stdin(path) else str(path)


@contextmanager
def _open_regular(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open ``path`` for reading only if it is a regular file (never blocks on a FIFO); ``-`` is stdin."""
    if is_stdin(path):
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise InputError("standard input is not available to read from; give a file instead of -")
        yield stream
        return
    p = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it changes nothing for a regular file
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"file not found: {p}") from None
    except IsADirectoryError:
        raise InputError(f"{p} is a directory; give a file") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise InputError(f"{p} is a directory; give a file")
        raise InputError(f"{p} is not a regular file (a device, FIFO or socket); give a file")
    with os.fdopen(fd, "rb", buffering=0) as handle:
        yield handle  # type: ignore[misc]


def _too_big(path: str | os.PathLike[str], max_bytes: int) -> InputError:
    return InputError(f"{source_name(path)} is over the limit of {max_bytes} bytes; split it")


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file, refusing anything else and stopping at ``max_bytes``.

    The limit is enforced while reading, not from the file's stated size, so a file that
    grows or lies about its size is still cut off.

    Raises:
        InputError: missing, a directory, a device/FIFO/socket, unreadable or over ``max_bytes``.
    """
    with _open_regular(path) as handle:
        parts: list[bytes] = []
        total = 0
        try:
            while block := handle.read(min(_BLOCK, max_bytes + 1 - total)):
                parts.append(block)
                total += len(block)
                if total > max_bytes:
                    raise _too_big(source_name(path), max_bytes)
        except OSError as exc:
            raise InputError(f"cannot read {source_name(path)}: {exc.strerror or exc}") from None
    return b"".join(parts)


def read_text_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """Read a UTF-8 text file (without a leading byte-order mark), refusing missing, unreadable, binary,
    non-regular or oversized files."""
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8-sig")  # UTF-8 that drops a leading byte-order mark
    except UnicodeDecodeError as exc:
        raise InputError(f"{source_name(path)} is not UTF-8 text (byte {exc.start}); convert it to UTF-8") from None


def iter_text_blocks(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES, block_bytes: int = _BLOCK
) -> Iterator[str]:
    """Decode a UTF-8 file block by block, so a large file never sits in memory whole (a leading
    byte-order mark is dropped).

    Raises:
        InputError: as :func:`read_bytes` (checked before the first block), or a byte that
            is not UTF-8 (found when its block is reached).
    """
    with _open_regular(path) as handle:
        decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
        total = 0
        while True:
            try:
                block = handle.read(block_bytes)
            except OSError as exc:
                raise InputError(f"cannot read {source_name(path)}: {exc.strerror or exc}") from None
            total += len(block)
            if total > max_bytes:
                raise _too_big(source_name(path), max_bytes)
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                raise InputError(f"{source_name(path)} is not UTF-8 text (byte {total - len(block) + exc.start}); "
                                 "convert it to UTF-8") from None
            if text:
                yield text
            if not block:
                return


class RealPaths:
    """``os.path.realpath`` for many files, each folder resolved once (``realpath`` walks every part
    of every path: 25 µs a file, a quarter of a second for 10,000 files).

    Example:
        >>> paths = RealPaths()
        >>> paths("/") == os.path.realpath("/")
        True
    """

    def __init__(self) -> None:
        self._folders: dict[str, str] = {}

    def __call__(self, path: str | os.PathLike[str], *, link: bool | None = None) -> str:
        """The resolved ``path``; ``link=False`` says the file itself is known not to be a link (one
        ``lstat`` saved)."""
        folder, name = os.path.split(os.fspath(path))
        if name in ("", ".", ".."):
            return os.path.realpath(path)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = os.path.realpath(folder or ".")
        full = os.path.join(real, name)
        return os.path.realpath(full) if link is not False and os.path.islink(full) else full


class DuplicateKeyError(InputError):
    """A JSON object holds one key twice (``json.loads`` would keep the last one without a word)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one object; give each key once (JSON readers "
                         "disagree on which copy counts)")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) < len(pairs):  # (the usual case, no key twice, costs one dict and one comparison)
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return data


def loads_json(text: str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """``json.loads(text)`` that refuses an object holding a key twice (:class:`DuplicateKeyError`), as
    every reader of user JSON (files, request bodies, stdio lines) does; ``parse_constant`` as in ``json.loads``.

    Example:
        >>> loads_json('{"text": "a", "text": "b"}')
        Traceback (most recent call last):
        ...
        meteora_edge.fileio.DuplicateKeyError: the key 'text' appears twice in one object; give each key once (JSON readers disagree on which copy counts)
    """
    return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=parse_constant)


def parse_json(text: str, where: object) -> Any:
    """``json.loads`` whose every failure is one :class:`InputError` naming ``where``.

    Integers of more than 4300 digits (Python's conversion limit) and nesting deeper than
    the interpreter's recursion limit are refused like syntax errors, and so is an object that
    holds a key twice.
    """
    try:
        return loads_json(text)
    except DuplicateKeyError as exc:
        raise InputError(f"{where} is ambiguous: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{where} is nested too deeply to read") from None
    except ValueError as exc:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise InputError(f"{where} holds a number JSON readers refuse ({str(exc).split(':')[0]})") from None


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file, naming line and column of a syntax error."""
    return parse_json(read_text_file(path), source_name(path))


def read_json_source(path: str | os.PathLike[str] | None, *, shipped: str, what: str) -> tuple[Any, str]:
    """A JSON file given by the user, or one shipped inside the package when ``path`` is None.

    Args:
        path: the user's file, or None.
        shipped: the shipped file's path inside the ``meteora_edge`` package (e.g. ``data/catalog.json``).
        what: what the file holds, for messages (``"the shipped catalog"``).

    Returns:
        ``(data, where)``: the parsed JSON and how messages should name its source.

    Raises:
        InputError: the file is missing or not valid JSON.
    """
    if path is not None:
        return read_json_file(path), str(path)
    from importlib import resources

    where = f"the shipped {what}"
    try:
        return json.loads(resources.files("meteora_edge").joinpath(shipped).read_text(encoding="utf-8")), where
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{where} ({shipped}) cannot be read: {exc}; reinstall meteora-edge") from None


def read_json_or_jsonl(path: str | os.PathLike[str]) -> Any:
    """Parse a file holding one JSON document, or JSON Lines (one value a line).

    A file that starts with ``[`` must be one valid document; otherwise a file that is not
    one document is read line by line, and errors name the line.

    Raises:
        InputError: missing, unreadable, empty or malformed.
    """
    return parse_json_or_jsonl(read_text_file(path), source_name(path))


class JsonLines(list):  # type: ignore[type-arg]
    """The values of a JSON Lines file, with ``numbers``: the line each came from."""

    def __init__(self) -> None:
        super().__init__()
        self.numbers: list[int] = []


def parse_json_or_jsonl(text: str, where: str, *, on_bad_line: Callable[[int, str], None] | None = None) -> Any:
    """Parse text holding one JSON document, or JSON Lines (one value a line); see :func:`read_json_or_jsonl`.

    Args:
        text: the file's text.
        where: how messages name the file.
        on_bad_line: called with ``(line number, why)`` for each JSON Lines line that is not
            valid JSON, which is then left out; by default such a line is an error.

    Returns:
        The document's value, or for JSON Lines a :class:`JsonLines` list of the values.

    Raises:
        InputError: empty or malformed (with ``on_bad_line``: no line of a JSON Lines file is valid).
    """
    try:
        return loads_json(text)
    except json.JSONDecodeError as whole:
        if text.lstrip().startswith("["):
            raise InputError(f"{where} is not valid JSON: {whole.msg} at line {whole.lineno} column {whole.colno}") from None
        # JSON Lines ends lines with \n (and \r\n) only: str.splitlines() would also split inside strings
        # at U+2028, U+2029, U+0085 and other breaks that JSON allows raw
        lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
        if not lines:
            raise InputError(f"{where} is empty; give JSON or JSON Lines") from None
        if len(lines) == 1:
            raise InputError(f"{where} is not valid JSON: {whole.msg} at line {whole.lineno} column {whole.colno}") from None
    except (RecursionError, ValueError):
        parse_json(text, where)  # raises the one-line error
    items = JsonLines()
    first_error: InputError | None = None
    for number, line in lines:
        try:
            try:
                items.append(loads_json(line))
                items.numbers.append(number)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where} line {number} is not valid JSON: {exc.msg} (column {exc.colno})") from None
            except (RecursionError, ValueError):
                parse_json(line, f"{where} line {number}")
        except InputError as exc:
            if on_bad_line is None:
                raise
            first_error = first_error or exc
            on_bad_line(number, str(exc).replace(f"{where} line {number} ", "", 1))
    if not items and first_error is not None:
        raise InputError(f"{where} holds no valid JSON line (first: {first_error})")
    return items


def read_chunks_file(path: str | os.PathLike[str]) -> list[Any]:
    """Read chunks from a JSON list, a ``{"chunks": [...]}`` object, or JSONL (one per line).

    Returns:
        The chunk items as found (strings or objects); their texts are checked later.

    Raises:
        InputError: the file is missing, malformed or holds no list of chunks.
    """
    data = read_json_or_jsonl(path)
    if isinstance(data, dict):
        if "chunks" not in data:
            raise InputError(f"{source_name(path)} holds an object without a 'chunks' key; give a list or {{\"chunks\": [...]}}")
        data = data["chunks"]
    elif not isinstance(data, list):
        data = [data]  # a single JSON Lines value
    if not isinstance(data, list):
        raise InputError(f"{source_name(path)}: chunks must be a list, got {type(data).__name__}")
    if not data:
        raise InputError(f"{source_name(path)} holds no chunks; give at least one")
    return data


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def give_normal_permissions(path: str | os.PathLike[str], *, directory: bool = False) -> None:
    """Undo mkstemp's 0600 / mkdtemp's 0700 so a file that holds nothing of the user's documents
    (a bundle's manifest, a model) stays readable under the umask."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def _settle_permissions(tmp: Path, target: Path, *, private: bool) -> None:
    """The mode the replacement of ``target`` gets: the old file's when there is one (the user
    chose it), else owner-only (mkstemp's 0600) for a ``private`` file or the umask's otherwise."""
    try:
        old = os.stat(target).st_mode & 0o7777
    except OSError:
        if not private:
            give_normal_permissions(tmp)
        return
    os.chmod(tmp, old)


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, private: bool = True) -> Iterator[Path]:
    """A temporary path beside ``path`` that replaces it when the block ends without error.

    The caller writes the temporary file (any library that takes a path will do); it is then
    fsynced and renamed over ``path``. A new file is owner-only (0600) when ``private`` (the
    default: what is written is derived from the user's documents), else it follows the umask;
    a file that existed keeps its mode. On any failure the temporary is removed and ``path``
    keeps its old content. A full disk, a read-only folder or any other ``OSError`` becomes one
    :class:`InputError`.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"cannot write {target}: folder {directory} does not exist")
    if target.is_dir():
        raise InputError(f"cannot write {target}: it is a directory; give a file name")
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as written:
            os.fsync(written.fileno())
        _settle_permissions(tmp, target, private=private)
        os.replace(tmp, target)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    except UnicodeEncodeError as exc:
        raise InputError(f"cannot write {target}: the text holds {exc.object[exc.start:exc.end]!r}, which is not "
                         "valid Unicode (a lone surrogate); fix the input it came from") from None
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def open_atomic(path: str | os.PathLike[str], *, private: bool = True) -> Iterator[IO[str]]:
    """A UTF-8 text handle whose content replaces ``path`` only when the block succeeds.

    Raises:
        InputError: as :func:`atomic_path`.
    """
    with atomic_path(path, private=private) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
        yield handle


def write_text_atomic(path: str | os.PathLike[str], text: str | Iterable[str], *, private: bool = True) -> None:
    """Write ``text`` (a string, or pieces written as they come) to ``path``: all or nothing.

    A new file is owner-only unless ``private`` is false (see :func:`atomic_path`).

    Raises:
        InputError: the folder is missing, the disk is full or read-only, or the text holds
            a lone surrogate; ``path`` is left as it was.
    """
    with open_atomic(path, private=private) as handle:
        if isinstance(text, str):
            handle.write(text)
        else:
            for piece in text:
                handle.write(piece)
