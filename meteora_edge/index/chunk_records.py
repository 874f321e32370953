"""Chunk records as every index stores them: chunking, the record line, and batched embedding.

A record is ``{"id", "text", "sha256", "source", "position", "start", "end", "metadata",
"file"}``: the chunk id, its text and the sha256 of the text, the document id, the chunk's
position in its document and character offsets, the document's metadata and the file it
came from. :class:`~meteora_edge.index.local_index.LocalIndex` stores one JSON line per
record; :class:`~meteora_edge.index.milvus_index.MilvusIndex` one row per record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from ..fileio import escape_line_separators
from ..models.encoders import EncoderLike, embed, normalize_rows
from .chunking import DEFAULT_BOUNDARIES, iter_chunks
from .corpus import SourceDocument
from .record_spool import SpooledTexts
from .vector_spool import VectorSpool

__all__ = ["Progress", "record_line", "chunk_records", "chunk_documents", "chunk_lines", "embed_batches", "embed_into", "length_order",
           "finite"]

Progress = Callable[[int, int], None]


def record_line(record: dict[str, Any]) -> bytes:
    """One chunks.jsonl line: the record with the sha256 of its text, strict JSON (no NaN) in UTF-8."""
    try:
        digest = hashlib.sha256(record["text"].encode("utf-8")).hexdigest()
        # id, text and the fresh digest lead; the record's other keys follow in its order (its id
        # and text land on the same places with the same values; a stale sha256 is dropped)
        line = {"id": record["id"], "text": record["text"], "sha256": digest,
                **{k: v for k, v in record.items() if k != "sha256"}}
        return escape_line_separators(json.dumps(line, ensure_ascii=False, allow_nan=False)).encode("utf-8") + b"\n"
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("utf-8", "backslashreplace").decode("ascii")
        raise InputError(f"document {record['source']!r} holds a lone surrogate ({bad}) that UTF-8 cannot store; "
                         "fix the document's text or metadata") from None
    except ValueError:
        raise InputError(f"the metadata of document {record['source']!r} holds NaN or Infinity, which JSON cannot "
                         "store; remove the value or write it as a string") from None
    except TypeError as exc:
        raise InputError(f"the metadata of document {record['source']!r} is not JSON ({exc})") from None


class _RecordTexts(Sequence[str]):
    """The chunk texts, read back from their serialised records when asked for, so a build
    holds each text once (in its record) and not twice."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, item):  # type: ignore[override]
        if isinstance(item, slice):
            return [json.loads(line)["text"] for line in self._lines[item]]
        return json.loads(self._lines[item])["text"]


def chunk_records(
    documents: Sequence[SourceDocument], start_id: int, chunk_size: int, overlap: int | None,
    boundaries: str = DEFAULT_BOUNDARIES,
) -> tuple[Sequence[str], list[bytes]]:
    """Chunk every document (streaming, one chunk at a time); return the chunk texts and their serialised records."""
    texts, lines, _ = chunk_documents(documents, start_id, chunk_size, overlap, boundaries)
    return texts, lines


def chunk_documents(
    documents: Sequence[SourceDocument], start_id: int, chunk_size: int, overlap: int | None,
    boundaries: str = DEFAULT_BOUNDARIES,
) -> tuple[Sequence[str], list[bytes], list[int]]:
    """:func:`chunk_records`, plus how many chunks each document made (in order)."""
    lines: list[bytes] = []
    counts = [0] * len(documents)
    for position, _, line in chunk_lines(documents, start_id, chunk_size, overlap, boundaries):
        lines.append(line)
        counts[position] += 1
    return _RecordTexts(lines), lines, counts


def chunk_lines(
    documents: Iterable[SourceDocument], start_id: int, chunk_size: int, overlap: int | None,
    boundaries: str = DEFAULT_BOUNDARIES,
) -> Iterator[tuple[int, str, bytes]]:
    """Chunk every document, one chunk at a time: (the document's position, the chunk's text,
    its record line) with ids counted from ``start_id`` (``boundaries`` as :func:`~.chunking.chunk_text`)."""
    chunk_id = start_id
    for position, document in enumerate(documents):
        for chunk in iter_chunks([document.text], chunk_size, overlap, boundaries=boundaries):
            yield position, chunk.text, record_line({
                "id": chunk_id,
                "text": chunk.text,
                "source": document.source_id,
                "position": chunk.index,
                "start": chunk.start_pos,
                "end": chunk.end_pos,
                "metadata": document.metadata,
                "file": document.file,
            })
            chunk_id += 1


def length_order(texts: Sequence[str]) -> np.ndarray:
    """Indices of ``texts`` longest first (by characters; ties keep input order).

    Batches cut from this order hold texts of similar length, so padding them to their longest
    wastes little work (character length follows token length closely enough for that).
    """
    if isinstance(texts, SpooledTexts):  # a build's spooled records know their lengths without being read
        lengths = texts.lengths()
    else:
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    return np.argsort(-lengths, kind="stable")


def embed_batches(encoder: EncoderLike, texts: Sequence[str], batch_size: int, progress: Progress | None) -> np.ndarray:
    """Embed ``texts`` ``batch_size`` at a time in length order; float32, L2-normalised rows in input order.

    The batches are cut from :func:`length_order` (each holds texts of similar length, so
    padding costs little), and ``progress(done, total)`` is called after each. A row does not
    depend on which batch it ran in.
    """
    out: list[np.ndarray] = []

    def put(rows: np.ndarray, vectors: np.ndarray) -> None:
        if not out:
            out.append(np.empty((len(texts), vectors.shape[1]), dtype=np.float32))
        out[0][rows] = vectors

    _embed_in_length_order(encoder, texts, batch_size, progress, put)
    return out[0] if out else np.zeros((0, 0), dtype=np.float32)


def embed_into(spool: VectorSpool, encoder: EncoderLike, texts: Sequence[str], batch_size: int,
               progress: Progress | None) -> VectorSpool:
    """:func:`embed_batches` writing the rows into ``spool`` instead of memory (a build of any size
    holds one batch of vectors at a time); returns ``spool``."""
    _embed_in_length_order(encoder, texts, batch_size, progress, spool.put)
    return spool


def _embed_in_length_order(encoder: EncoderLike, texts: Sequence[str], batch_size: int, progress: Progress | None,
                           put: Callable[[np.ndarray, np.ndarray], None]) -> None:
    order = length_order(texts)
    for lo in range(0, len(texts), batch_size):
        rows = order[lo : lo + batch_size]
        vectors = embed(encoder, [texts[int(i)] for i in rows])
        put(rows, normalize_rows(vectors).astype(np.float32, copy=False))
        if progress:
            progress(min(lo + batch_size, len(texts)), len(texts))


def finite(value: Any) -> Any:
    """``value`` with NaN/Infinity replaced by None (format-1 records could hold them)."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value
