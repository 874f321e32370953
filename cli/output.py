"""Printing or atomically writing a command's JSON result."""

from __future__ import annotations

import json
from typing import Any

import click

from meteora_edge.fileio import write_text_atomic


def emit_json(data: Any, *, output: str | None, compact: bool) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=None if compact else 2) + "\n"
    if output:
        write_text_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
