"""``chunk``: split a document into word windows that keep their character offsets."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import click

from meteora_edge.documents import Chunk
from meteora_edge.errors import InputError
from meteora_edge.fileio import is_stdin, source_name, write_text_atomic
from meteora_edge.index.chunking import BOUNDARIES, DEFAULT_BOUNDARIES, check_chunking, iter_chunks
from meteora_edge.readers.sections import text_sections

from .output import check_output_path, chunks_json, stdout_is_unicode


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--boundaries", type=click.Choice(BOUNDARIES), default=DEFAULT_BOUNDARIES, show_default=True,
              help="Where a chunk may end: at a paragraph, list item or sentence break (text: a clause stays "
                   "whole, --overlap only where a sentence is cut), or after any word (words: fixed windows).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def chunk(file: str, chunk_size: int, overlap: int | None, boundaries: str, output: str | None, compact: bool) -> None:
    """Split a document (- for standard input) into overlapping word-window chunks with character offsets.

    Any file 'index build' reads is accepted: text in any encoding, markdown, HTML, PDF (each
    chunk's metadata names its page), Word (.docx) and gzip-compressed files. A plain UTF-8
    file is read and written as a stream, so memory stays near one chunk's size; other formats
    (and standard input) are extracted whole first, under the same size limit.

    \b
    Examples:
      meteora-edge chunk contract.txt --chunk-size 120 -o chunks.json
      meteora-edge chunk contract.md --chunk-size 60 -o clauses.json
      meteora-edge chunk report.pdf -o chunks.json
      gunzip -c notes.html.gz | meteora-edge chunk - > chunks.json
    """
    if output:
        check_output_path(output, inputs=[("FILE", file)])
    overlap = check_chunking(chunk_size, overlap, boundaries)
    name = source_name(file) if is_stdin(file) else Path(file).name
    sections = text_sections(file, source_name(file))

    def chunks() -> Iterator[Chunk]:
        index = 0
        for section in sections:
            for piece in iter_chunks(section.blocks(), chunk_size, overlap, boundaries=boundaries,
                                     metadata={"source": name, **section.metadata}):
                yield replace(piece, index=index)
                index += 1

    if output:
        write_text_atomic(output, chunks_json(chunks(), compact=compact, ensure_ascii=False))
        click.echo(f"wrote {output}", err=True)
        return
    # stdout cannot be taken back: read the whole file once (UTF-8, size, a word) before printing
    has_word = False
    for section in sections:
        for block in section.blocks():
            has_word = has_word or not block.isspace()
    if not has_word:
        raise InputError(f"{source_name(file)} holds no words; nothing to chunk")
    for piece in chunks_json(chunks(), compact=compact, ensure_ascii=not stdout_is_unicode()):
        click.echo(piece, nl=False)
