"""Reading the CLI's input files and writing outputs atomically.

Readers turn every problem (missing file, bad encoding, malformed JSON, wrong shape)
into one :class:`InputError` naming the file and the fix. Writers never leave a half file:
they write a temporary file beside the target and rename it into place.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = [
    "read_text_file",
    "read_chunks_file",
    "read_json_file",
    "read_json_or_jsonl",
    "read_json_source",
    "write_text_atomic",
    "give_normal_permissions",
    "MAX_INPUT_BYTES",
]

MAX_INPUT_BYTES = 512 * 1024 * 1024


def read_text_file(path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """Read a UTF-8 text file, refusing missing, unreadable, binary or oversized files."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise InputError(f"{p} is a directory; give a file")
        if size > max_bytes:
            raise InputError(f"{p} is {size} bytes, over the limit of {max_bytes}; split it")
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"file not found: {p}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{p} is not UTF-8 text (byte {exc.start}); convert it to UTF-8") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file, naming line and column of a syntax error."""
    text = read_text_file(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to read") from None


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
    text = read_text_file(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as whole:
        if text.lstrip().startswith("["):
            raise InputError(f"{path} is not valid JSON: {whole.msg} at line {whole.lineno} column {whole.colno}") from None
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if not lines:
            raise InputError(f"{path} is empty; give JSON or JSON Lines") from None
        if len(lines) == 1:
            raise InputError(f"{path} is not valid JSON: {whole.msg} at line {whole.lineno} column {whole.colno}") from None
    except RecursionError:
        raise InputError(f"{path} is nested too deeply to read") from None
    items = []
    for number, line in lines:
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path} line {number} is not valid JSON: {exc.msg} at column {exc.colno}") from None
        except RecursionError:
            raise InputError(f"{path} line {number} is nested too deeply to read") from None
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
            raise InputError(f"{path} holds an object without a 'chunks' key; give a list or {{\"chunks\": [...]}}")
        data = data["chunks"]
    elif not isinstance(data, list):
        data = [data]  # a single JSON Lines value
    if not isinstance(data, list):
        raise InputError(f"{path}: chunks must be a list, got {type(data).__name__}")
    if not data:
        raise InputError(f"{path} holds no chunks; give at least one")
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
    """Undo mkstemp's 0600 / mkdtemp's 0700 so a copied bundle or index stays readable."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename (all or nothing)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"cannot write {target}: folder {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        give_normal_permissions(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
