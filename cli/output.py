"""Printing or atomically writing a command's result, and checking output paths before any work.

Output works whatever the terminal's encoding: stdout and stderr replace what their encoding
cannot show by escapes (``PYTHONIOENCODING=latin-1`` must not crash a command), and JSON for a
terminal that is not Unicode is written with ``\\uXXXX`` escapes, which every JSON reader
decodes to the same text.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from meteora_edge.documents import Chunk
from meteora_edge.errors import InputError
from meteora_edge.fileio import escape_line_separators, write_text_atomic

_UNICODE = {"utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "gb18030"}
_SLICE = 1 << 20  # characters of one chunk text encoded at a time
_MARK = "\x00meteora-edge-text\x00"


def tolerant_streams() -> None:
    """Make stdout/stderr escape characters their encoding lacks instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot change; leave it as it is
                pass


def stdout_is_unicode() -> bool:
    """True when stdout's encoding can represent every character."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name in _UNICODE
    except LookupError:
        return False


def check_output_path(path: str, *, option: str = "--output", inputs: Iterable[tuple[str, str | None]] = ()) -> None:
    """Refuse an output file that cannot be written, or that is one of the command's inputs, before a
    long run (not after it).

    Args:
        path: the output file.
        option: its option, for messages.
        inputs: ``(option, path)`` of each file the command reads (``None`` and ``-`` are skipped):
            writing over one of them would lose it.

    Raises:
        InputError: the path is a folder, its folder does not exist, is not writable, or it is an input
            (the same file after resolving links).
    """
    target = Path(path)
    for input_option, source in inputs:
        if source is not None and source != "-" and os.path.exists(source) and same_file(source, path):
            raise InputError(f"{option} {target} is the input of {input_option}; writing it would overwrite the input, "
                             "give another output file")
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise InputError(f"{option} {target} is a folder; give a file name")
    if not folder.is_dir():
        raise InputError(f"cannot write {option} {target}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"cannot write {option} {target}: permission denied")


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: after resolving links (hard links too, when both exist)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_output_dir(path: str, *, option: str = "--output-dir") -> None:
    """Refuse an output folder that cannot be created or written, before any work.

    Raises:
        InputError: the path is a file, or its parent folder is missing or not writable.
    """
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError(f"{option} {target} is a file; give a folder")
    parent = target if target.is_dir() else target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot create {option} {target}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {option} {target}: permission denied")


def emit_json(data: Any, *, output: str | None, compact: bool) -> None:
    """Write ``data`` as JSON to ``output`` (atomically, UTF-8) or to stdout."""
    if output:
        write_text_atomic(output, escape_line_separators(json.dumps(data, ensure_ascii=False, indent=None if compact else 2)) + "\n")
        click.echo(f"wrote {output}", err=True)
    else:
        text = json.dumps(data, ensure_ascii=not stdout_is_unicode(), indent=None if compact else 2)
        click.echo(escape_line_separators(text) + "\n", nl=False)


def emit_text(text: str, *, output: str | None) -> None:
    """Write plain text to ``output`` (atomically, UTF-8) or to stdout."""
    if output:
        write_text_atomic(output, text)
    else:
        click.echo(text, nl=False)


def chunks_json(chunks: Iterable[Chunk], *, compact: bool, ensure_ascii: bool) -> Iterator[str]:
    """``{"chunks": [...]}`` as JSON pieces, one chunk at a time and long texts in slices.

    The pieces join to what ``json.dumps({"chunks": [c.to_dict() ...]}, indent=2)`` writes
    (or its one-line form), without ever holding more than one chunk's text.
    """
    indent = None if compact else 2
    yield '{"chunks": [' if compact else '{\n  "chunks": ['
    for number, chunk in enumerate(chunks):
        head, tail = json.dumps({**chunk.to_dict(), "text": _MARK}, ensure_ascii=ensure_ascii, indent=indent).split(
            json.dumps(_MARK, ensure_ascii=ensure_ascii))
        head, tail = escape_line_separators(head), escape_line_separators(tail)
        if not compact:
            head, tail = head.replace("\n", "\n    "), tail.replace("\n", "\n    ")
        yield ("" if number == 0 else ", " if compact else ",") + ("" if compact else "\n    ") + head + '"'
        for start in range(0, len(chunk.text), _SLICE):
            yield escape_line_separators(json.dumps(chunk.text[start : start + _SLICE], ensure_ascii=ensure_ascii)[1:-1])
        yield '"' + tail
    yield "]}\n" if compact else "\n  ]\n}\n"
