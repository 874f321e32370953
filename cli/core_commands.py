"""``select`` and ``chunk``: the model-free core commands."""

from __future__ import annotations

from pathlib import Path

import click

from meteora_edge.chunking import chunk_text
from meteora_edge.documents import document_texts
from meteora_edge.ecse import MeteoraSelector
from meteora_edge.encoders import HashingEncoder
from meteora_edge.errors import InputError
from meteora_edge.fileio import read_chunks_file, read_json_file, read_text_file
from meteora_edge.rationales import Rationale, as_rationales, parse_rationales

from .output import emit_json


def _load_rationales(path: str) -> list[Rationale]:
    text = read_text_file(path)
    if path.endswith(".json") or text.lstrip().startswith("["):
        data = read_json_file(path)
        if isinstance(data, dict) and "rationales" in data:
            data = data["rationales"]
        return as_rationales(data)
    return parse_rationales(text)


def gather_rationales(
    query: str | None, texts: tuple[str, ...], files: tuple[str, ...], use_query: bool
) -> list[Rationale]:
    """Rationales from --rationale, --rationales and the query, renumbered 1..N."""
    collected: list[Rationale] = []
    for text in texts:
        collected += as_rationales([text])
    for path in files:
        collected += _load_rationales(path)
    has_query = bool(query and query.strip())
    if use_query and not has_query:
        raise InputError("--use-query-as-rationale needs a non-empty --query")
    if has_query and (use_query or not collected):
        collected.append(Rationale(text=" ".join(query.split())))  # type: ignore[union-attr]
    if not collected:
        raise InputError("no rationale and no query; give --rationale TEXT, --rationales FILE or --query Q")
    return [Rationale(r.text, i, r.label, r.flag_instructions) for i, r in enumerate(collected, start=1)]


@click.command()
@click.option("--chunks", "chunks_file", required=True, help="JSON list, {\"chunks\": [...]} or JSONL of chunks.")
@click.option("--query", "-q", default=None, help="The question (used as a rationale when none is given).")
@click.option("--rationale", "rationale_texts", multiple=True, help="A rationale text; repeatable.")
@click.option("--rationales", "rationale_files", multiple=True, help="File of rationales (tagged text or JSON list).")
@click.option("--use-query-as-rationale", is_flag=True, help="Add the query to the given rationales.")
@click.option("--expansion-window", type=click.IntRange(min=0), default=1, show_default=True,
              help="Neighbours added on each side of every selected chunk.")
@click.option("--elbow-z", type=float, default=1.0, show_default=True, help="z-score threshold of the pooled elbow.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def select(
    chunks_file: str,
    query: str | None,
    rationale_texts: tuple[str, ...],
    rationale_files: tuple[str, ...],
    use_query_as_rationale: bool,
    expansion_window: int,
    elbow_z: float,
    output: str | None,
    compact: bool,
) -> None:
    """Select the evidence chunks that match the rationales (METEORA's ECSE)."""
    chunks = read_chunks_file(chunks_file)
    texts = document_texts(chunks)
    rationales = gather_rationales(query, rationale_texts, rationale_files, use_query_as_rationale)
    selector = MeteoraSelector(HashingEncoder(), expansion_window=expansion_window, elbow_z_threshold=elbow_z)
    result = selector.select(texts, rationales)
    data = {"query": query, **result.to_dict(), "selected_chunks": [texts[i] for i in result.selected_indices]}
    emit_json(data, output=output, compact=compact)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def chunk(file: str, chunk_size: int, overlap: int | None, output: str | None, compact: bool) -> None:
    """Split a text file into overlapping word-window chunks with character offsets."""
    chunks = chunk_text(read_text_file(file), chunk_size, overlap, metadata={"source": Path(file).name})
    emit_json({"chunks": [c.to_dict() for c in chunks]}, output=output, compact=compact)
