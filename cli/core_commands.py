"""``chunk``: split a text file into word windows that keep their character offsets."""

from __future__ import annotations

from pathlib import Path

import click

from meteora_edge.fileio import read_text_file
from meteora_edge.index.chunking import chunk_text

from .output import check_output_path, emit_json


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def chunk(file: str, chunk_size: int, overlap: int | None, output: str | None, compact: bool) -> None:
    """Split a text file into overlapping word-window chunks with character offsets."""
    if output:
        check_output_path(output)
    chunks = chunk_text(read_text_file(file), chunk_size, overlap, metadata={"source": Path(file).name})
    emit_json({"chunks": [c.to_dict() for c in chunks]}, output=output, compact=compact)
