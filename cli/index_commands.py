"""``meteora-edge index build|add|info``: the local corpus index."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from meteora_edge.index.corpus import SourceDocument, path_label, read_documents
from meteora_edge.index.content_hashes import unseen_documents
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


def _read(inputs: Sequence[str], strict: bool) -> tuple[list[SourceDocument], int]:
    """The documents, with one warning line per skipped file; returns (documents, files skipped)."""
    skipped = 0

    def warn(path: Path, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        label = path_label(path)
        click.echo(f"warning: skipped {reason}" if label in reason else f"warning: skipped {label}: {reason}", err=True)

    return read_documents(inputs, strict=strict, on_skip=warn), skipped


def _counts(documents: Sequence[SourceDocument], skipped: int) -> str:
    files = len({d.file for d in documents})
    return f"{len(documents)} documents from {files} file(s)" + (f", {skipped} file(s) skipped" if skipped else "")


_strict_option = click.option("--strict", is_flag=True, help="Fail on a file that cannot be read instead of skipping it.")


@click.group()
def index() -> None:
    """Build and inspect a local corpus index (vectors, chunk store, BM25)."""


@index.command("build")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "-o", required=True, type=click.Path(), help="Index folder to create (missing or empty).")
@click.option("--chunk-size", type=click.IntRange(min=1), default=200, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Chunks embedded per batch.")
@click.option("--overwrite", is_flag=True, help="Replace an existing index at --out (never anything else).")
@_strict_option
@bundle_option
@threads_option
@precision_option
@cache_option
def build(inputs: tuple[str, ...], out: str, chunk_size: int, overlap: int | None, batch_size: int, overwrite: bool,
          strict: bool, bundle: str | None, threads: int, precision: str) -> None:
    """Index text, markdown, JSON and JSONL files (folders are searched recursively).

    A file that cannot be used (a PDF, another type, not UTF-8, JSON without text) is skipped
    with one warning line naming it and why; --strict fails instead.
    """
    documents, skipped = _read(inputs, strict)
    encoder = encoder_from_options(bundle, threads, precision)
    with _progress("embedding") as progress:
        built = LocalIndex.build(out, documents, encoder, chunk_size=chunk_size, overlap=overlap,
                                 batch_size=batch_size, overwrite=overwrite, progress=progress)
    click.echo(f"indexed {_counts(documents, skipped)} into {len(built)} chunks at {out}", err=True)


@index.command("add")
@click.argument("index_dir", type=click.Path())
@click.argument("inputs", nargs=-1, required=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--allow-duplicates", is_flag=True, help="Add documents whose content the index already holds.")
@_strict_option
@bundle_option
@threads_option
@precision_option
@cache_option
def add(index_dir: str, inputs: tuple[str, ...], batch_size: int, allow_duplicates: bool, strict: bool,
        bundle: str | None, threads: int, precision: str) -> None:
    """Append documents to an index (chunked and embedded like the rest; writers take turns).

    Documents already in the index (every chunk's text matches a stored one, by sha256) are
    left out, so adding the same files twice adds nothing; --allow-duplicates adds them anyway.
    """
    documents, skipped = _read(inputs, strict)
    recorded = LocalIndex.load(index_dir, verify=False).encoder_id
    encoder = encoder_from_options(bundle, threads, precision, index_encoder=recorded)
    current = LocalIndex.load(index_dir, encoder=encoder)
    fresh = documents if allow_duplicates else unseen_documents(current, documents)
    known = len(documents) - len(fresh)
    grown, added = current, 0
    if fresh:  # add() checks again under the writer lock, against the version it appends to
        with _progress("embedding") as progress:
            grown = current.add(fresh, encoder, batch_size=batch_size, progress=progress,
                                allow_duplicates=allow_duplicates)
        if grown.generation != current.generation:
            added = grown.manifest["last_write"]["chunks"]
    note = f"; {known} document(s) already in the index were left out" if known else ""
    click.echo(f"read {_counts(documents, skipped)}; added {added} chunks{note}; "
               f"{index_dir} now holds {len(grown)}", err=True)


@index.command("info")
@click.argument("index_dir", type=click.Path())
def info(index_dir: str) -> None:
    """Describe an index (after checking every file)."""
    click.echo(json.dumps(LocalIndex.load(index_dir).info(), indent=2))
