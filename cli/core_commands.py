"""``chunk``: split a text file into word windows that keep their character offsets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from meteora_edge.documents import Chunk
from meteora_edge.errors import InputError
from meteora_edge.fileio import is_stdin, iter_text_blocks, read_text_file, source_name, write_text_atomic
from meteora_edge.index.chunking import check_chunking, iter_chunks

from .output import check_output_path, chunks_json, stdout_is_unicode


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def chunk(file: str, chunk_size: int, overlap: int | None, output: str | None, compact: bool) -> None:
    """Split a text file (- for standard input) into overlapping word-window chunks with character offsets.

    The file is read and written as a stream, so memory stays near one chunk's size
    (standard input is read whole first, under the same size limit).

    \b
    Examples:
      meteora-edge chunk contract.txt --chunk-size 120 -o chunks.json
      pdftotext contract.pdf - | meteora-edge chunk - > chunks.json
    """
    if output:
        check_output_path(output, inputs=[("FILE", file)])
    overlap = check_chunking(chunk_size, overlap)
    whole = [t for t in [read_text_file(file)] if t] if is_stdin(file) else None  # stdin can be read once
    name = source_name(file) if is_stdin(file) else Path(file).name

    def blocks() -> Iterator[str]:
        return iter(whole) if whole is not None else iter_text_blocks(file)

    def chunks() -> Iterator[Chunk]:
        return iter_chunks(blocks(), chunk_size, overlap, metadata={"source": name})

    if output:
        write_text_atomic(output, chunks_json(chunks(), compact=compact, ensure_ascii=False))
        click.echo(f"wrote {output}", err=True)
        return
    # stdout cannot be taken back: read the whole file once (UTF-8, size, a word) before printing
    has_word = False
    for block in blocks():
        has_word = has_word or not block.isspace()
    if not has_word:
        raise InputError(f"{source_name(file)} holds no words; nothing to chunk")
    for piece in chunks_json(chunks(), compact=compact, ensure_ascii=not stdout_is_unicode()):
        click.echo(piece, nl=False)
