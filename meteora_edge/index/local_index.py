"""The local corpus index: chunk store, normalised vectors and BM25 in one checked folder.

Layout of an index folder::

    manifest.json        format, encoder identity and dimension, chunking, counts, file hashes
    vectors.npy          float32 (n, dim), L2-normalised, memory-mapped on load
    chunks.jsonl         one chunk record per line (id, text, source, offsets, metadata)
    chunk_offsets.npy    byte offset of every line, so records load on demand
    bm25_*.npy/.json     the BM25 index (see :mod:`meteora_edge.index.bm25`)

Builds and appends write a complete new folder beside the target and swap it in with
renames, the manifest last: an interrupted build leaves the old index or none, never a
half-written one that loads. Loading checks the format, every file's size and sha256,
the array shapes, and (given an encoder) that the same encoder made the index.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .bm25 import BM25Index, bm25_tokens
from ..models.bundle import sha256_file
from .chunking import chunk_text
from .content_hashes import record_file, unseen_documents
from .corpus import SourceDocument
from ..models.encoders import EncoderLike, embed, encoder_id, normalize_rows
from ..errors import ConfigError, InputError, LocalIndexError
from ..fileio import give_normal_permissions
from ..selection.stages import top_k_indices

__all__ = ["LocalIndex", "INDEX_FORMAT", "INDEX_FORMAT_VERSION"]

INDEX_FORMAT = "meteora-edge-index"
INDEX_FORMAT_VERSION = 1
_MANIFEST = "manifest.json"
Progress = Callable[[int, int], None]


@contextmanager
def _swap_in(target: Path) -> Iterator[Path]:
    """Yield a fresh folder beside ``target``; on success it replaces ``target`` atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.building-"))
    try:
        yield work
        give_normal_permissions(work, directory=True)
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
            os.replace(target, old / "index")
            os.replace(work, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(work, target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _chunk_records(documents: Sequence[SourceDocument], start_id: int, chunk_size: int, overlap: int | None):
    records = []
    for document in documents:
        for chunk in chunk_text(document.text, chunk_size, overlap):
            records.append(
                {
                    "id": start_id + len(records),
                    "text": chunk.text,
                    "source": document.source_id,
                    "position": chunk.index,
                    "start": chunk.start_pos,
                    "end": chunk.end_pos,
                    "metadata": document.metadata,
                    "file": document.file,
                }
            )
    return records


def _embed_batches(encoder: EncoderLike, texts: list[str], batch_size: int, progress: Progress | None) -> np.ndarray:
    parts = []
    for lo in range(0, len(texts), batch_size):
        parts.append(embed(encoder, texts[lo : lo + batch_size]))
        if progress:
            progress(min(lo + batch_size, len(texts)), len(texts))
    return normalize_rows(np.concatenate(parts).astype(np.float32)).astype(np.float32)


class LocalIndex:
    """A loaded local index. Use :meth:`build`, :meth:`load` and :meth:`add`."""

    def __init__(self, root: Path, manifest: dict[str, Any], vectors: np.ndarray, offsets: np.ndarray, bm25: BM25Index):
        self.root = root
        self.manifest = manifest
        self.vectors = vectors
        self.offsets = offsets
        self.bm25 = bm25

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def encoder_id(self) -> str:
        return str(self.manifest["encoder"]["id"])

    # ----------------------------------------------------------------- writing
    @classmethod
    def build(
        cls,
        out: str | os.PathLike[str],
        documents: Sequence[SourceDocument],
        encoder: EncoderLike,
        *,
        chunk_size: int = 256,
        overlap: int | None = None,
        batch_size: int = 64,
        overwrite: bool = False,
        progress: Progress | None = None,
    ) -> LocalIndex:
        """Chunk, embed and index ``documents`` into the folder ``out``.

        Raises:
            InputError: no documents, or ``out`` exists and ``overwrite`` is off.
            ConfigError: bad chunking or batch settings.
        """
        target = Path(out)
        if target.exists() and not overwrite:
            raise InputError(f"{target} already exists; use 'index add' to append or --overwrite to rebuild")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        records = _chunk_records(documents, 0, chunk_size, overlap)
        if not records:
            raise InputError("the documents hold no text to index")
        vectors = _embed_batches(encoder, [r["text"] for r in records], batch_size, progress)
        bm25 = BM25Index.build(bm25_tokens(r["text"]) for r in records)
        manifest = {
            "format": INDEX_FORMAT,
            "format_version": INDEX_FORMAT_VERSION,
            "encoder": {"id": encoder_id(encoder), "dimension": int(vectors.shape[1])},
            "chunking": {"chunk_size": chunk_size, "overlap": chunk_size // 10 if overlap is None else overlap},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        with _swap_in(target) as work:
            cls._write(work, manifest, vectors, records, None, bm25)
        return cls.load(target, encoder=encoder)

    def add(
        self,
        documents: Sequence[SourceDocument],
        encoder: EncoderLike,
        *,
        batch_size: int = 64,
        progress: Progress | None = None,
        allow_duplicates: bool = False,
    ) -> LocalIndex:
        """Append documents (chunked like the index) and return the reloaded index.

        Documents whose every chunk is already in the index (same text, by hash) are left out
        unless ``allow_duplicates``; when nothing new is left the index is returned as it is.
        """
        self._check_encoder(encoder)
        if not allow_duplicates:
            documents = unseen_documents(self, documents)
            if not documents:
                return self
        chunking = self.manifest["chunking"]
        records = _chunk_records(documents, len(self), chunking["chunk_size"], chunking["overlap"])
        if not records:
            raise InputError("the documents hold no text to add")
        new_vectors = _embed_batches(encoder, [r["text"] for r in records], batch_size, progress)
        vectors = np.concatenate([np.asarray(self.vectors), new_vectors])
        bm25 = self.bm25.extend(bm25_tokens(r["text"]) for r in records)
        with _swap_in(self.root) as work:
            self._write(work, dict(self.manifest), vectors, records, self.root / "chunks.jsonl", bm25)
        return LocalIndex.load(self.root, encoder=encoder)

    @staticmethod
    def _write(
        work: Path,
        manifest: dict[str, Any],
        vectors: np.ndarray,
        records: list[dict[str, Any]],
        previous_chunks: Path | None,
        bm25: BM25Index,
    ) -> None:
        np.save(work / "vectors.npy", vectors)
        offsets: list[int] = []
        with open(work / "chunks.jsonl", "wb") as handle:
            if previous_chunks is not None:
                with open(previous_chunks, "rb") as old:
                    for line in old:
                        offsets.append(handle.tell())
                        handle.write(line)
            for record in records:
                offsets.append(handle.tell())
                handle.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        np.save(work / "chunk_offsets.npy", np.asarray(offsets, dtype=np.int64))
        names = ["vectors.npy", "chunks.jsonl", "chunk_offsets.npy", *bm25.save(work)]
        manifest = {
            **manifest,
            "count": int(vectors.shape[0]),
            "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "files": {name: {"sha256": sha256_file(work / name), "size": (work / name).stat().st_size} for name in names},
        }
        (work / _MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    # ----------------------------------------------------------------- reading
    @classmethod
    def load(cls, path: str | os.PathLike[str], *, encoder: EncoderLike | None = None, verify: bool = True) -> LocalIndex:
        """Open an index folder, checking it thoroughly.

        Args:
            path: the index folder.
            encoder: when given, must be the encoder that built the index.
            verify: check every file's sha256 (sizes and shapes are always checked).

        Raises:
            LocalIndexError: missing, half-written, corrupt, newer-format or mismatched index.
        """
        root = Path(path)
        manifest_path = root / _MANIFEST
        if not root.is_dir():
            raise LocalIndexError(f"index folder not found: {root}; build one with 'meteora-edge index build'")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LocalIndexError(f"{root} has no {_MANIFEST}: not an index, or a build that did not finish") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise LocalIndexError(f"{manifest_path} is corrupt; rebuild the index") from None
        if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT:
            raise LocalIndexError(f"{root} is not a meteora-edge index")
        version = manifest.get("format_version")
        if not isinstance(version, int) or version > INDEX_FORMAT_VERSION:
            raise LocalIndexError(
                f"{root} has index format version {version!r}; this meteora-edge reads up to {INDEX_FORMAT_VERSION}"
            )
        files = manifest.get("files")
        if not isinstance(files, dict) or not files:
            raise LocalIndexError(f"{manifest_path} lists no files; rebuild the index")
        for name, entry in files.items():
            file = root / name
            if Path(name).name != name or not file.is_file():
                raise LocalIndexError(f"{file} is missing from the index; rebuild it")
            if file.stat().st_size != entry.get("size"):
                raise LocalIndexError(f"{file} has the wrong size (truncated or replaced); rebuild the index")
            if verify and sha256_file(file) != entry.get("sha256"):
                raise LocalIndexError(f"{file} does not match its sha256 (corrupt or tampered); rebuild the index")
        try:
            vectors = np.load(root / "vectors.npy", mmap_mode="r", allow_pickle=False)
            offsets = np.load(root / "chunk_offsets.npy", allow_pickle=False)
        except ValueError as exc:
            raise LocalIndexError(f"index arrays in {root} are unreadable ({exc}); rebuild the index") from None
        count = manifest.get("count")
        dim = manifest.get("encoder", {}).get("dimension")
        if vectors.ndim != 2 or vectors.shape != (count, dim) or offsets.shape != (count,):
            raise LocalIndexError(
                f"index {root} is inconsistent: vectors {vectors.shape}, offsets {offsets.shape}, manifest count {count}"
            )
        bm25 = BM25Index.load(root)
        if bm25.n_docs != count:
            raise LocalIndexError(f"index {root}: BM25 covers {bm25.n_docs} chunks, vectors {count}; rebuild it")
        index = cls(root, manifest, vectors, offsets, bm25)
        if encoder is not None:
            index._check_encoder(encoder)
        return index

    def _check_encoder(self, encoder: EncoderLike) -> None:
        given = encoder_id(encoder)
        if given != self.encoder_id:
            raise LocalIndexError(
                f"index {self.root} was built with encoder {self.encoder_id!r}, not {given!r}; "
                "use the same --bundle or rebuild the index"
            )

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The stored chunk records for ``ids`` (read on demand)."""
        out = []
        with open(self.root / "chunks.jsonl", "rb") as handle:
            for i in ids:
                if not 0 <= int(i) < len(self):
                    raise InputError(f"chunk id {i} is outside the index (0..{len(self) - 1})")
                handle.seek(int(self.offsets[int(i)]))
                out.append(json.loads(handle.readline()))
        return out

    def search(self, query_vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Cosine kNN: the ``k`` nearest chunk ids and their scores, best first."""
        q = normalize_rows(np.asarray(query_vector, dtype=np.float32).reshape(1, -1))[0]
        if q.shape[0] != self.vectors.shape[1]:
            raise InputError(f"query vector has dimension {q.shape[0]}, the index {self.vectors.shape[1]}")
        scores = np.asarray(self.vectors @ q)
        best = top_k_indices(scores, k)
        return best, scores[best]

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """BM25 over the whole index: the ``k`` best chunk ids with a positive score."""
        return self.bm25.search(query, k)

    def info(self) -> dict[str, Any]:
        """Counts and settings; ``sources`` counts the files indexed (``documents`` the documents
        in them); both are ``None`` over 200 000 chunks."""
        documents: set[Any] = set()
        files: set[Any] = set()
        if len(self) <= 200_000:
            for record in self.records(range(len(self))):
                documents.add(record["source"])
                files.add(record_file(record))
        return {
            "path": str(self.root),
            "chunks": len(self),
            "sources": len(files) if files else None,
            "documents": len(documents) if documents else None,
            "encoder": self.manifest["encoder"],
            "chunking": self.manifest["chunking"],
            "bm25_terms": len(self.bm25.vocab),
            "created": self.manifest.get("created"),
            "updated": self.manifest.get("updated"),
            "bytes": sum(e["size"] for e in self.manifest["files"].values()),
        }
