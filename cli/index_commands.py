"""``meteora-edge index build|add|info``: the local corpus index."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from meteora_edge.index.corpus import read_documents
from meteora_edge.index.local_index import LocalIndex

from .encoder_option import bundle_option, cache_option, encoder_from_options, precision_option, threads_option


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A click progress bar on stderr, driven by (done, total) callbacks."""
    bar = None
    shown = 0
    try:
        def update(done: int, total: int) -> None:
            nonlocal bar, shown
            if bar is None:
                bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True)
                bar.__enter__()
            bar.update(done - shown)
            shown = done

        yield update
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


@click.group()
def index() -> None:
    """Build and inspect a local corpus index (vectors, chunk store, BM25)."""


@index.command("build")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "-o", required=True, type=click.Path(file_okay=False), help="Index folder to create.")
@click.option("--chunk-size", type=click.IntRange(min=1), default=200, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Chunks embedded per batch.")
@click.option("--overwrite", is_flag=True, help="Replace an existing index at --out.")
@bundle_option
@threads_option
@precision_option
@cache_option
def build(inputs: tuple[str, ...], out: str, chunk_size: int, overlap: int | None, batch_size: int, overwrite: bool,
          bundle: str | None, threads: int, precision: str) -> None:
    """Index text, markdown, JSON and JSONL files (folders are searched recursively)."""
    documents = read_documents(inputs)
    encoder = encoder_from_options(bundle, threads, precision)
    with _progress("embedding") as progress:
        built = LocalIndex.build(out, documents, encoder, chunk_size=chunk_size, overlap=overlap,
                                 batch_size=batch_size, overwrite=overwrite, progress=progress)
    click.echo(f"indexed {len(documents)} documents into {len(built)} chunks at {out}", err=True)


@index.command("add")
@click.argument("index_dir", type=click.Path(file_okay=False))
@click.argument("inputs", nargs=-1, required=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@bundle_option
@threads_option
@precision_option
@cache_option
def add(index_dir: str, inputs: tuple[str, ...], batch_size: int, bundle: str | None, threads: int, precision: str) -> None:
    """Append documents to an index (chunked and embedded like the rest)."""
    encoder = encoder_from_options(bundle, threads, precision, index_dir=index_dir)
    current = LocalIndex.load(index_dir, encoder=encoder)
    documents = read_documents(inputs)
    with _progress("embedding") as progress:
        grown = current.add(documents, encoder, batch_size=batch_size, progress=progress)
    click.echo(f"added {len(grown) - len(current)} chunks; {index_dir} now holds {len(grown)}", err=True)


@index.command("info")
@click.argument("index_dir", type=click.Path(file_okay=False))
def info(index_dir: str) -> None:
    """Describe an index (after checking every file)."""
    click.echo(json.dumps(LocalIndex.load(index_dir).info(), indent=2))
