"""``meteora-edge index build|add|info|search``: the local corpus index, or a Milvus collection."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import click

from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.index.file_choice import FileChoice
from meteora_edge.index.skips import plural
from meteora_edge.errors import InputError, MeteoraError
from meteora_edge.index.ann_index import ANN_KINDS, EXACT_BELOW, AnnConfig, require_faiss
from meteora_edge.index.chunking import BOUNDARIES, DEFAULT_BOUNDARIES
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.milvus_location import MilvusLocation, milvus_location
from meteora_edge.pipeline.request import reword

from .encoder_option import bundle_option, build_threads_option, cache_option, encoder_from_options, precision_option
from .encoder_option import threads_option
from .index_location import check_encoder, index_bundle, open_index, quiet_milvus_logs
from .output import emit_json
from .progress import progress_option, progress_reporter
from .reading_options import SkipReport, file_choice, file_choice_options

#: the library's names in LocalIndex.build's messages, as ``index build`` spells them
BUILD_NAMES = {"add": "'index add'", "overwrite": "--overwrite", "lexical_scorer": "--lexical-scorer"}


def _read(inputs: Sequence[str], strict: bool, follow_links: bool, choice: FileChoice,
          report: SkipReport) -> list[SourceDocument]:
    """The documents; every skipped file goes to ``report`` (printed by the caller at the end)."""
    return read_documents(inputs, strict=strict, on_skip=report, follow_links=follow_links, choice=choice)


def _counts(documents: Sequence[SourceDocument]) -> str:
    return f"{plural(len(documents), 'document')} from {plural(len({d.file for d in documents}), 'file')}"


_strict_option = click.option("--strict", is_flag=True, help="Fail on a file that cannot be read instead of skipping it.")
_follow_links_option = click.option(
    "--follow-links", is_flag=True,
    help="Inside folders, also index symlinked files that point outside the inputs (skipped by default).")


def _reading_and_embedding_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that reads files and embeds them (build, add, sync), in help order."""
    for option in reversed((_strict_option, _follow_links_option, bundle_option, build_threads_option, precision_option,
                            cache_option, progress_option)):
        command = option(command)
    return file_choice_options(command)


@click.group()
def index() -> None:
    """Build and inspect a corpus index: a local folder (vectors, chunk store, BM25) or a Milvus collection."""


def _target(backend: str, out: str | None, uri: str | None, collection: str | None, ann: str | None,
            ann_probe: int | None) -> MilvusLocation | None:
    """Check the options that say where the index goes; the Milvus location, or None for a local index."""
    if ann_probe is not None and ann is None:
        raise InputError("--ann-probe sets the ANN structure's search width; add --ann ivf or --ann hnsw")
    if backend == "local":
        if out is None or uri or collection:
            raise InputError("a local index needs --out FOLDER (--uri and --collection are for --backend milvus)")
        if ann:
            require_faiss()
        return None
    if uri is None or out:
        raise InputError("--backend milvus needs --uri (a Milvus Lite path ending in .db, or http(s)://HOST:PORT) "
                         "instead of --out")
    if ann:
        raise InputError("--ann builds the local index's ANN structure; Milvus indexes its vectors itself")
    location = milvus_location(uri, collection)
    quiet_milvus_logs()
    return location


@index.command("build")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--out", "-o", type=click.Path(), default=None, help="Index folder to create (missing or empty).")
@click.option("--backend", type=click.Choice(["local", "milvus"]), default="local", show_default=True,
              help="Where the index goes: a local folder (--out) or a Milvus collection (--uri; pip install "
                   "\"meteora-edge[milvus]\").")
@click.option("--uri", default=None,
              help="Milvus: a Milvus Lite database path ending in .db (e.g. ./corpus.db), or http(s)://HOST:PORT.")
@click.option("--collection", default=None,
              help="Milvus collection [the .db file's name, e.g. corpus; on a server: meteora_edge].")
@click.option("--chunk-size", type=click.IntRange(min=1), default=200, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--boundaries", type=click.Choice(BOUNDARIES), default=DEFAULT_BOUNDARIES, show_default=True,
              help="Where a chunk may end: at a paragraph, list item or sentence break (text: a clause stays "
                   "whole, --overlap only where a sentence is cut), or after any word (words: fixed windows).")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Chunks embedded per batch.")
@click.option("--overwrite", is_flag=True, help="Replace an existing index at --out or collection (never anything else).")
@click.option("--ann", type=click.Choice(ANN_KINDS), default=None,
              help="Also build an approximate kNN structure (faiss; pip install \"meteora-edge[ann]\"): ivf or hnsw. "
                   f"Used when the index holds {EXACT_BELOW:,}+ chunks.")
@click.option("--ann-probe", type=click.IntRange(min=1), default=None,
              help="IVF lists scanned per query, or HNSW efSearch [chosen from the size].")
@click.option("--lexical-scorer", type=click.Choice(["bm25", "sparse"]), default="bm25", show_default=True,
              help="Also store learned-sparse postings (sparse: the bundle's sparse_encoder, e.g. splade-tiny) beside "
                   "BM25 (a Milvus collection: in a sparse vector field); queries over the index are then scored by them.")
@_reading_and_embedding_options
def build(inputs: tuple[str, ...], out: str | None, backend: str, uri: str | None, collection: str | None,
          chunk_size: int, overlap: int | None, boundaries: str, batch_size: int, overwrite: bool, ann: str | None,
          ann_probe: int | None, lexical_scorer: str, strict: bool, follow_links: bool, bundle: str | None,
          threads: int, precision: str, progress_mode: str, include: tuple[str, ...], exclude: tuple[str, ...],
          no_ignore_files: bool, max_file_size: int | None, verbose: bool) -> None:
    """Index documents: text in any encoding (with or without an extension), markdown, HTML, PDF, Word
    (.docx), JSON and JSONL, and any of them gzip-compressed (folders are searched recursively; - reads stdin).

    Inside folders, --include/--exclude choose files by .gitignore-style patterns, and
    .gitignore and .meteoraignore files are honoured. A file that cannot be used (binary,
    another type, damaged, JSON without text) is skipped: one summary line counts them by
    reason (--verbose lists each); --strict fails instead. The bundle's path and manifest hash
    are recorded: later commands over the index use it when --bundle is not given.

    \b
    Examples:
      meteora-edge index build examples/ --out corpus.idx --bundle models/bundles/default
      meteora-edge index build notes.md faq.jsonl --out corpus.idx --chunk-size 120 --boundaries words --overwrite
      meteora-edge index build ~/Documents --include '*.pdf' --include '*.docx' --exclude 'old/' --out docs.idx
      cat report.pdf | meteora-edge index build - --out report.idx --progress json
    """
    location = _target(backend, out, uri, collection, ann, ann_probe)
    report = SkipReport(verbose)
    documents = _read(inputs, strict, follow_links, file_choice(include, exclude, no_ignore_files, max_file_size),
                      report)
    encoder = encoder_from_options(bundle, threads, precision, bulk=True)
    started = time.monotonic()
    with progress_reporter(progress_mode, "embedding", "chunks") as progress:
        if location is None:
            try:
                built = LocalIndex.build(str(out), documents, encoder, chunk_size=chunk_size, overlap=overlap,
                                         boundaries=boundaries, batch_size=batch_size, overwrite=overwrite, progress=progress,
                                         ann=AnnConfig(kind=ann, probe=ann_probe) if ann else None, bundle=bundle,
                                         lexical_scorer=lexical_scorer)
            except MeteoraError as exc:
                raise reword(exc, BUILD_NAMES) from None
            where = out
        else:
            from meteora_edge.index.milvus_index import MilvusIndex

            built = MilvusIndex.build(location, documents, encoder, chunk_size=chunk_size, overlap=overlap,
                                      boundaries=boundaries, batch_size=batch_size, overwrite=overwrite, progress=progress, bundle=bundle,
                                      lexical_scorer=lexical_scorer)
            where = location.label
    took = max(time.monotonic() - started, 1e-9)
    report.print_summary()
    click.echo(f"indexed {_counts(documents)} into {plural(len(built), 'chunk')} at {where} in {took:.1f} s "
               f"({len(built) / took:.1f} chunks/s)", err=True)


@index.command("add")
@click.argument("index_dir", metavar="INDEX")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--allow-duplicates", is_flag=True, help="Add documents whose content the index already holds.")
@_reading_and_embedding_options
def add(index_dir: str, inputs: tuple[str, ...], batch_size: int, allow_duplicates: bool, strict: bool,
        follow_links: bool, bundle: str | None, threads: int, precision: str, progress_mode: str,
        include: tuple[str, ...], exclude: tuple[str, ...], no_ignore_files: bool, max_file_size: int | None,
        verbose: bool) -> None:
    """Append documents (files, folders, - for stdin) to an index folder or milvus:// collection.

    They are chunked and embedded like the rest, with the bundle the index was built with
    unless --bundle is given.

    Documents already in the index (every chunk's text matches a stored one, by sha256) are
    left out, so adding the same files twice adds nothing; --allow-duplicates adds them anyway.
    A local index's writers take turns; a Milvus collection takes one writer at a time.
    """
    report = SkipReport(verbose)
    documents = _read(inputs, strict, follow_links, file_choice(include, exclude, no_ignore_files, max_file_size),
                      report)
    current = open_index(index_dir)
    bundle = index_bundle(current, bundle, index_dir)
    encoder = encoder_from_options(bundle, threads, precision, index_encoder=current.encoder_id, bulk=True)
    check_encoder(current, encoder, index_dir)
    with progress_reporter(progress_mode, "embedding", "chunks") as progress:
        if isinstance(current, LocalIndex):  # the plan is made under the writer lock, against the current version
            grown: Any = current.add(documents, encoder, batch_size=batch_size, progress=progress,
                                     allow_duplicates=allow_duplicates)
        else:
            current.add(documents, encoder, batch_size=batch_size, progress=progress,  # type: ignore[attr-defined]
                        allow_duplicates=allow_duplicates)
            grown = current
    replaced = (f", replacing {plural(grown.removed_chunks, 'chunk')} of changed files" if grown.removed_chunks
                else "")
    left_out = grown.left_out_documents
    note = (f"; {plural(left_out, 'document')} already in the index {'was' if left_out == 1 else 'were'} left out"
            if left_out else "")
    report.print_summary()
    click.echo(f"read {_counts(documents)}; added {plural(grown.added_chunks, 'chunk')}{replaced}{note}; "
               f"{index_dir} now holds {plural(len(grown), 'chunk')}", err=True)


def _updatable(index_dir: str) -> Any:
    """The index to update by source: a local index folder or a Milvus collection (both have sync and remove)."""
    from meteora_edge.index.milvus_location import is_milvus_url

    if is_milvus_url(index_dir):
        return open_index(index_dir)
    return LocalIndex.load(index_dir, verify=False)


def _local_index(index_dir: str, command: str) -> LocalIndex:
    from meteora_edge.index.milvus_location import is_milvus_url

    if is_milvus_url(index_dir):
        raise InputError(f"index {command} works on a local index folder; Milvus compacts a collection's segments "
                         "itself")
    return LocalIndex.load(index_dir, verify=False)


@index.command("sync")
@click.argument("index_dir", metavar="INDEX")
@click.argument("inputs", nargs=-1, required=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--checksum", is_flag=True,
              help="Read every file and compare its content hash, to find edits that kept its size and modification "
                   "time (slower: each file is read).")
@_reading_and_embedding_options
def sync(index_dir: str, inputs: tuple[str, ...], batch_size: int, checksum: bool, strict: bool, follow_links: bool,
         bundle: str | None, threads: int, precision: str, progress_mode: str, include: tuple[str, ...],
         exclude: tuple[str, ...], no_ignore_files: bool, max_file_size: int | None, verbose: bool) -> None:
    """Make INDEX (a folder or milvus:// collection) follow the files and folders given: add new files, replace
    changed ones, remove deleted ones.

    Only files whose size or modification time changed are read again (--checksum reads every
    file and compares what it holds); a renamed or copied
    file re-uses its stored vectors. --include/--exclude and ignore files choose the files as for
    'index build': a source they now leave out is removed. Sources outside the folders given are left alone, and
    index folders are never read. The change costs time in proportion to the chunks it
    touches (a delta segment, compacted later; see 'index compact').

    \b
    Examples:
      meteora-edge index sync notes.idx notes/
      meteora-edge index sync notes.idx notes/ more-notes/today.md
      meteora-edge index sync milvus://./notes.db notes/
    """
    current = _updatable(index_dir)
    bundle = index_bundle(current, bundle, index_dir)
    encoder = encoder_from_options(bundle, threads, precision, index_encoder=current.encoder_id, bulk=True)
    check_encoder(current, encoder, index_dir)
    report = SkipReport(verbose)
    choice = file_choice(include, exclude, no_ignore_files, max_file_size)
    with progress_reporter(progress_mode, "embedding", "chunks") as progress:
        synced = current.sync(list(inputs), encoder, batch_size=batch_size, progress=progress, strict=strict,
                              follow_links=follow_links, on_skip=report, choice=choice,
                              checksum=checksum)
    report.print_summary()
    click.echo(f"synced {index_dir}: added {plural(synced.added_chunks, 'chunk')}, removed "
               f"{plural(synced.removed_chunks, 'chunk')}; now holds {plural(len(synced), 'chunk')}", err=True)


@index.command("remove")
@click.argument("index_dir", metavar="INDEX")
@click.argument("sources", nargs=-1, required=True)
def remove(index_dir: str, sources: tuple[str, ...]) -> None:
    """Remove the chunks of SOURCES (file paths as indexed, or folders: every source under them) from INDEX
    (a folder or milvus:// collection).

    \b
    Examples:
      meteora-edge index remove notes.idx notes/old-plan.md
      meteora-edge index remove notes.idx notes/archive/
    """
    left = _updatable(index_dir).remove(list(sources))
    click.echo(f"removed {left.removed_chunks} chunks from {index_dir}; it now holds {len(left)}", err=True)


@index.command("compact")
@click.argument("index_dir", metavar="INDEX")
def compact(index_dir: str) -> None:
    """Write a local INDEX again as one segment, dropping removed chunks (updates do this past a threshold)."""
    compacted = _local_index(index_dir, "compact").compact()
    click.echo(f"compacted {index_dir}: {len(compacted)} chunks in one segment", err=True)


@index.command("info")
@click.argument("index_dir", metavar="INDEX")
def info(index_dir: str) -> None:
    """Describe an index folder (after checking every file) or a milvus:// collection."""
    click.echo(json.dumps(open_index(index_dir).info(), indent=2))  # type: ignore[attr-defined]


@index.command("search")
@click.argument("index_dir", metavar="INDEX")
@click.option("--query", "-q", required=True, help="The question.")
@click.option("-k", "k", type=click.IntRange(min=1, max=10_000), default=10, show_default=True, help="Chunks to return.")
@click.option("--scoring", type=click.Choice(["hybrid", "dense", "lexical"]), default="hybrid", show_default=True,
              help="Rank by cosine + BM25 standardised and added (hybrid), cosine alone or BM25 alone.")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON.")
@bundle_option
@threads_option
@precision_option
@cache_option
def search(index_dir: str, query: str, k: int, scoring: str, as_json: bool, bundle: str | None, threads: int,
           precision: str) -> None:
    """Retrieval only: the K best chunks of INDEX for a query, with their scores (no selection).

    The index's own analyser (BM25), lexical scorer (its sparse postings when it was built with
    --lexical-scorer sparse) and encoder are used: the bundle the index was built with unless
    --bundle is given. The candidates and order are those 'select --index'
    starts from.

    \b
    Examples:
      meteora-edge index search corpus.idx -q "who may terminate the agreement?"
      meteora-edge index search corpus.idx -q "late fees" -k 3 --json
    """
    from meteora_edge.documents import check_unicode
    from meteora_edge.pipeline.retrieval import search as search_index

    check_unicode(query, "--query")
    if not query.strip():
        raise InputError("--query must not be empty")
    current = open_index(index_dir)
    bundle = index_bundle(current, bundle, index_dir)
    encoder = encoder_from_options(bundle, threads, precision, index_encoder=current.encoder_id)
    check_encoder(current, encoder, index_dir)
    hits = search_index(current, encoder, query, k=k, scoring=scoring)
    if as_json:
        emit_json({"query": query, "index": index_dir, "encoder": current.encoder_id, "scoring": scoring,
                   "lexical_scorer": getattr(current, "lexical_scorer", "bm25"),
                   "hits": [h.to_dict() for h in hits]}, output=None, compact=False)
        return
    if not hits:
        click.echo(f"no chunk of {index_dir} matches the query", err=True)
    for rank, hit in enumerate(hits, start=1):
        lexical = "" if hit.lexical is None else f" {getattr(current, 'lexical_scorer', 'bm25')} {hit.lexical:.3f}"
        source = hit.record.get("source") or hit.record.get("metadata", {}).get("source") or ""
        click.echo(f"{rank:>3}. [{hit.id}] score {hit.score:.3f} (cosine {hit.dense:.3f}{lexical}) {source}")
        click.echo("     " + " ".join(hit.text.split())[:300])
