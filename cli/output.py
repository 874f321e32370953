"""Printing or atomically writing a command's result, and checking output paths before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from meteora_edge.errors import InputError
from meteora_edge.fileio import write_text_atomic


def check_output_path(path: str, *, option: str = "--output") -> None:
    """Refuse an output file that cannot be written, before a long run (not after it).

    Raises:
        InputError: the path is a folder, its folder does not exist, or is not writable.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise InputError(f"{option} {target} is a folder; give a file name")
    if not folder.is_dir():
        raise InputError(f"cannot write {option} {target}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InputError(f"cannot write {option} {target}: permission denied")


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
    text = json.dumps(data, ensure_ascii=False, indent=None if compact else 2) + "\n"
    if output:
        write_text_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
