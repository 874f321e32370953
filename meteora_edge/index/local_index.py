"""The local corpus index: chunk store, normalised vectors and BM25, durable and safe to share.

One version of an index is a generation folder (see :mod:`meteora_edge.index.generations`)::

    manifest.json        format, encoder identity and dimension, chunking, lexical analyser, counts, file hashes
    vectors.npy          float32 (n, dim), L2-normalised, memory-mapped on load
    chunks.jsonl         one chunk record per line (id, text, sha256 of the text, source, offsets, metadata)
    chunk_offsets.npy    byte offset of every line, so records load on demand
    bm25_*.npy/.json     the BM25 index (see :mod:`meteora_edge.models.bm25`)
    ann.faiss            optional: an ANN structure for kNN (see :mod:`meteora_edge.index.ann_index`)

:meth:`LocalIndex.build` and :meth:`LocalIndex.add` hold the index's writer lock while
they read its state and write a new generation, so concurrent writers queue up and none
loses the other's chunks. A loaded index keeps its files open and reads only them, so it
stays consistent while writers replace the index. Loading checks the manifest against its
schema, every file's size and sha256, the array dtypes and shapes, and (given an encoder)
that the same encoder made the index.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..models.analyzer import DEFAULT_ANALYZER, LEGACY_ANALYZER, Analyzer, analyzer_from_record
from ..models.bm25 import BM25_ARRAYS, BM25_VOCAB, BM25Index
from .ann_index import EXACT_BELOW, AnnConfig, AnnIndex, ann_entry, build_ann
from .bundle_record import bundle_record
from .chunk_records import Progress, chunk_records, embed_batches, embed_into, finite, record_line
from .content_hashes import source_counts, unseen_documents
from .corpus import SourceDocument
from .manifest import ANN_FILE, INDEX_FORMAT, INDEX_FORMAT_VERSION, MANIFEST, parse_strict_json
from .chunking import count_words
from .generations import GenerationWriter, new_generation, target_state, writer_lock
from .generations import lock_timeout as resolve_lock_timeout
from .snapshot import Snapshot, open_snapshot, read_npy
from .vector_spool import VectorSpool, spool_folder
from ..models.encoders import EncoderLike, encoder_id, normalize_rows
from ..errors import ConfigError, InputError, LocalIndexError
from ..models.vectors import top_k_indices

__all__ = ["LocalIndex", "INDEX_FORMAT", "INDEX_FORMAT_VERSION"]

_COPY_BLOCK = 1 << 20


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class LocalIndex:
    """One opened version of a local index. Use :meth:`build`, :meth:`load` and :meth:`add`.

    Example:
        >>> import tempfile
        >>> from meteora_edge import HashingEncoder
        >>> folder = tempfile.mkdtemp()
        >>> docs = [SourceDocument("a", "Either party may terminate on ninety days notice.")]
        >>> index = LocalIndex.build(f"{folder}/ix", docs, HashingEncoder(), chunk_size=4, overlap=0)
        >>> index.records([0])[0]["text"]
        'Either party may terminate'
    """

    def __init__(self, snapshot: Snapshot) -> None:
        """Build the arrays from an opened snapshot (use :meth:`load`)."""
        manifest, handles, where = snapshot.manifest, snapshot.handles, snapshot.folder
        count, dim = manifest["count"], manifest["encoder"]["dimension"]
        self.root = snapshot.root
        self.generation = snapshot.generation
        #: What the :meth:`add` call that returned this version wrote (0 and 0 for any other version).
        self.added_chunks = 0
        self.added_documents = 0
        self.manifest = manifest
        self.vectors = read_npy(handles["vectors.npy"], dtype=np.dtype("<f4"), shape=(count, dim), mmap=True,
                                where=str(where / "vectors.npy"))
        self.offsets = read_npy(handles["chunk_offsets.npy"], dtype=np.dtype("<i8"), shape=(count,), mmap=False,
                                where=str(where / "chunk_offsets.npy"))
        chunks: BinaryIO = handles["chunks.jsonl"]
        self._chunk_bytes = manifest["files"]["chunks.jsonl"]["size"]
        if (
            self.offsets[0] != 0
            or np.any(np.diff(self.offsets) <= 0)
            or self.offsets[-1] >= self._chunk_bytes
            or os.pread(chunks.fileno(), 1, self._chunk_bytes - 1) != b"\n"
        ):
            raise LocalIndexError(f"chunk offsets in {where} do not fit chunks.jsonl; rebuild the index")
        arrays = [read_npy(handles[n], dtype=t, shape=None, mmap=True, where=str(where / n)) for n, t in BM25_ARRAYS]
        vocab = parse_strict_json(handles[BM25_VOCAB].read(), str(where / BM25_VOCAB), max_bytes=None)
        self.analyzer = (analyzer_from_record(manifest["analyzer"], where=f"index {where}", error=LocalIndexError)
                         if "analyzer" in manifest else LEGACY_ANALYZER)
        self.bm25 = BM25Index.from_stored(vocab, *arrays, where=str(where), analyzer=self.analyzer)
        if self.bm25.n_docs != count:
            raise LocalIndexError(f"index {where}: BM25 covers {self.bm25.n_docs} chunks, vectors {count}; rebuild it")
        self.ann: AnnIndex | None = None
        if "ann" in manifest:
            self.ann = AnnIndex(handles[ANN_FILE].read(), manifest["ann"], count=count, dimension=dim,
                                where=str(where / ANN_FILE))
        self._chunks = os.fdopen(os.dup(chunks.fileno()), "rb")
        weakref.finalize(self, self._chunks.close)
        self._check_chunking(where)

    def _check_chunking(self, where: Path) -> None:
        """The manifest's chunk_size must hold the first and last stored chunks (a cheap check that
        it was not edited: add chunks new documents with it)."""
        size = self.manifest["chunking"]["chunk_size"]
        for record in self.records(sorted({0, len(self) - 1})):
            words = count_words(record["text"])
            if words > size:
                raise LocalIndexError(
                    f"{where / MANIFEST} is corrupt: chunking.chunk_size is {size}, but chunk {record['id']} holds "
                    f"{words} words; rebuild the index")

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
        ann: AnnConfig | None = None,
        bundle: str | os.PathLike[str] | None = None,
        lock_timeout: float | None = None,
        analyzer: Analyzer = DEFAULT_ANALYZER,
    ) -> LocalIndex:
        """Chunk, embed and index ``documents`` into the folder ``out``.

        ``out`` may be missing or empty; an existing index is replaced only with
        ``overwrite``; anything else (a file, a folder of other files) is refused untouched.
        Embedding runs first; then, under the writer lock, a new generation is written and
        switched in, so readers of the old index keep reading it. With ``ann`` an ANN
        structure is built over the vectors too (needs the ``ann`` extra). With ``bundle`` (the
        folder ``encoder`` came from) its absolute path and manifest sha256 are recorded, so
        later commands can use it again (see :mod:`meteora_edge.index.bundle_record`).
        ``lock_timeout`` is how many seconds to wait for another writer (default:
        ``$METEORA_EDGE_LOCK_TIMEOUT``, else 60). ``analyzer`` turns the chunks into BM25
        terms and is recorded in the manifest, so queries and later :meth:`add` calls are
        analysed the same way.

        Returns:
            The new index, opened.

        Raises:
            InputError: no documents, bad text or metadata, or ``out`` is not free to write.
            ConfigError: bad chunking or batch settings.
            LocalIndexError: the folder cannot be written (the previous index stays).
            MissingExtraError: ``ann`` is given and faiss-cpu is not installed.
        """
        target = Path(out)
        wait = resolve_lock_timeout(lock_timeout)  # a bad value fails before the embedding, not after it
        if target_state(target) == "index" and not overwrite:
            raise InputError(f"{target} already exists; use 'add' to append or 'overwrite' to rebuild")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        texts, lines = chunk_records(documents, 0, chunk_size, overlap)
        if not lines:
            raise InputError("the documents hold no text to index")
        record = bundle_record(bundle)
        if not isinstance(analyzer, Analyzer):
            raise ConfigError(f"analyzer must be an Analyzer, got {type(analyzer).__name__}")
        # the vectors go to a temporary file as they are computed, so memory does not grow with the corpus
        with VectorSpool(len(lines), spool_folder(target), where=target) as vectors:
            embed_into(vectors, encoder, texts, batch_size, progress)
            bm25 = BM25Index.from_texts(texts, analyzer=analyzer)
            ann_bytes = None
            if ann is not None:
                entry = ann_entry(ann, len(lines))
                ann_bytes = build_ann(vectors.array(), entry)
            manifest = {
                "format": INDEX_FORMAT,
                "format_version": INDEX_FORMAT_VERSION,
                "encoder": {"id": encoder_id(encoder), "dimension": int(vectors.shape[1]),
                            **({"bundle": record} if record else {})},
                "chunking": {"chunk_size": chunk_size, "overlap": chunk_size // 10 if overlap is None else overlap},
                "analyzer": analyzer.record(),
                "created": _now(),
                "last_write": {"op": "build", "chunks": len(lines)},
                **({"ann": entry} if ann is not None else {}),
            }
            with writer_lock(target, create=True, timeout=wait):
                if target_state(target) == "index" and not overwrite:  # another build got there first
                    raise InputError(f"{target} already exists; use 'add' to append or 'overwrite' to rebuild")
                with new_generation(target) as writer:
                    _write(writer, manifest, vectors, lines, None, bm25, ann_bytes)
                return cls.load(target, encoder=encoder, verify=False)

    def add(
        self,
        documents: Sequence[SourceDocument],
        encoder: EncoderLike,
        *,
        batch_size: int = 64,
        progress: Progress | None = None,
        allow_duplicates: bool = False,
        lock_timeout: float | None = None,
    ) -> LocalIndex:
        """Append documents to the index at ``self.root``; return the new version, opened.

        Under the writer lock the index is opened again, so the documents are chunked
        like, numbered after and appended to the version current at that moment (which
        may be newer than ``self``), never to a stale copy. Documents that version already
        holds (every chunk's text has a stored chunk's sha256) are left out unless
        ``allow_duplicates``; when none is left, that version is returned and nothing is written.
        The returned version's ``added_chunks`` and ``added_documents`` say what this call wrote
        (0 when another writer had added the same documents first).
        An ANN structure, if the index has one, receives the new vectors (an IVF keeps the
        lists it was trained on; rebuild after the corpus has changed a lot). ``lock_timeout``
        is as in :meth:`build`.

        Raises:
            InputError: the documents hold no text, or bad text or metadata.
            LocalIndexError: another encoder built the index, the index is damaged, or it
                cannot be written (then it stays as it was).
        """
        self._check_encoder(encoder)
        with writer_lock(self.root, create=False, timeout=resolve_lock_timeout(lock_timeout)):
            base = LocalIndex.load(self.root, encoder=encoder)
            if not allow_duplicates:
                documents = unseen_documents(base, documents)
                if not documents:
                    return base  # everything is in the index already: nothing to write
            chunking = base.manifest["chunking"]
            texts, lines = chunk_records(documents, len(base), chunking["chunk_size"], chunking["overlap"])
            if not lines:
                raise InputError("the documents hold no text to add")
            new_vectors = embed_batches(encoder, texts, batch_size, progress)
            vectors = np.concatenate([np.asarray(base.vectors), new_vectors])
            bm25 = base.bm25.extend_texts(texts)  # analysed as the index's first chunks were
            manifest = {
                **{k: base.manifest[k] for k in ("format", "encoder", "chunking", "created")},
                **({"analyzer": base.manifest["analyzer"]} if "analyzer" in base.manifest else {}),
                "format_version": INDEX_FORMAT_VERSION,
                "last_write": {"op": "add", "chunks": len(lines)},
                **({"ann": base.manifest["ann"]} if base.ann is not None else {}),
            }
            ann_bytes = base.ann.extended(new_vectors) if base.ann is not None else None
            with new_generation(self.root) as writer:
                _write(writer, manifest, vectors, lines, base, bm25, ann_bytes)
            grown = LocalIndex.load(self.root, encoder=encoder, verify=False)
            grown.added_chunks, grown.added_documents = len(lines), len(documents)
            return grown

    def _copy_records(self, out: Any) -> np.ndarray:
        """Write this version's chunk lines to ``out`` (from the open file); return their offsets."""
        fd = self._chunks.fileno()
        if self.manifest["format_version"] >= 2:
            for start in range(0, self._chunk_bytes, _COPY_BLOCK):
                out.write(os.pread(fd, min(_COPY_BLOCK, self._chunk_bytes - start), start))
            return np.asarray(self.offsets, dtype=np.int64)
        offsets = []  # format 1: rewrite each record with the sha256 of its text, as valid JSON
        for start in range(0, len(self), 4096):
            for record in self.records(range(start, min(start + 4096, len(self)))):
                offsets.append(out.size)
                out.write(record_line(finite(record)))
        return np.asarray(offsets, dtype=np.int64)

    # ----------------------------------------------------------------- reading
    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, encoder: EncoderLike | None = None, verify: bool = True
    ) -> LocalIndex:
        """Open the current version of an index, checking it thoroughly.

        Args:
            path: the index folder.
            encoder: when given, must be the encoder that built the index.
            verify: check every file's sha256 (the schema, sizes and shapes are always checked).

        Raises:
            LocalIndexError: missing, half-written, corrupt, newer-format or mismatched index.
        """
        snapshot = open_snapshot(Path(path), verify=verify)
        try:
            index = cls(snapshot)
        finally:
            snapshot.close()  # the arrays stay mapped and the chunk file open through a duplicate
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
        """The stored chunk records for ``ids``, read from this version's open chunk file."""
        out = []
        fd = self._chunks.fileno()
        for i in map(int, ids):
            if not 0 <= i < len(self):
                raise InputError(f"chunk id {i} is outside the index (0..{len(self) - 1})")
            start = int(self.offsets[i])
            end = int(self.offsets[i + 1]) if i + 1 < len(self) else self._chunk_bytes
            try:
                record = json.loads(os.pread(fd, end - start, start))
            except ValueError:
                record = None
            if not isinstance(record, dict) or record.get("id") != i or not isinstance(record.get("text"), str):
                raise LocalIndexError(
                    f"chunk record {i} of {self.root} is not where its offset says; rebuild the index"
                )
            out.append(record)
        return out

    def search(self, query_vector: np.ndarray, k: int, *, exact: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Cosine kNN: the ``k`` nearest chunk ids and their scores, best first.

        Args:
            query_vector: the query's embedding.
            k: how many neighbours.
            exact: ``None`` (the default) uses the index's ANN structure when it has one and
                holds at least :data:`~meteora_edge.index.ann_index.EXACT_BELOW` chunks, else
                reads every vector; ``True`` always reads every vector; ``False`` always uses
                the ANN structure. ANN candidates are scored with their exact cosines.

        Raises:
            InputError: a query of another dimension, or ``exact=False`` on an index without ANN.
        """
        q = normalize_rows(np.asarray(query_vector, dtype=np.float32).reshape(1, -1))[0]
        if q.shape[0] != self.vectors.shape[1]:
            raise InputError(f"query vector has dimension {q.shape[0]}, the index {self.vectors.shape[1]}")
        if exact is False and self.ann is None:
            raise InputError(f"index {self.root} has no ANN structure; rebuild it with 'index build --ann ivf'")
        if self.ann is not None and (exact is False or (exact is None and len(self) >= EXACT_BELOW)):
            candidates = self.ann.candidates(q, k)
            scores = np.asarray(self.vectors[candidates] @ q)
            best = top_k_indices(scores, k)
            return candidates[best], scores[best]
        scores = np.asarray(self.vectors @ q)
        best = top_k_indices(scores, k)
        return best, scores[best]

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """BM25 over the whole index: the ``k`` best chunk ids with a positive score."""
        return self.bm25.search(query, k)

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray:
        """BM25 of ``text`` (this package's own, as in :meth:`bm25_search`) for each of ``ids``."""
        return self.bm25.text_scores_for(text, ids)

    def vectors_for(self, ids: Sequence[int]) -> np.ndarray:
        """The L2-normalised vectors of ``ids`` (float32, read from the memory-mapped file)."""
        return np.asarray(self.vectors[list(ids)], dtype=np.float32)

    def info(self) -> dict[str, Any]:
        """A summary: path, version, counts, encoder, chunking, dates and size in bytes.

        ``sources`` counts the files indexed and ``documents`` the documents in them (both
        ``None`` over 200 000 chunks).
        """
        files, documents = source_counts(self)
        return {
            "path": str(self.root),
            "format_version": self.manifest["format_version"],
            "generation": self.generation,
            "chunks": len(self),
            "sources": files,
            "documents": documents,
            "encoder": self.manifest["encoder"],
            "chunking": self.manifest["chunking"],
            "bm25_terms": len(self.bm25.vocab),
            "analyzer": self.analyzer.record(),
            "ann": self.manifest.get("ann"),
            "created": self.manifest.get("created"),
            "updated": self.manifest.get("updated"),
            "last_write": self.manifest.get("last_write"),
            "bytes": sum(e["size"] for e in self.manifest["files"].values()),
        }


def _write(
    writer: GenerationWriter,
    manifest: dict[str, Any],
    vectors: np.ndarray | VectorSpool,
    lines: list[bytes],
    base: LocalIndex | None,
    bm25: BM25Index,
    ann_bytes: bytes | None,
) -> None:
    """Write one generation: the base version's chunks (if any) followed by ``lines`` (and the ANN structure)."""
    if isinstance(vectors, VectorSpool):
        with writer.stream("vectors.npy") as out:
            vectors.write_npy(out)
    else:
        writer.write_array("vectors.npy", vectors)
    with writer.stream("chunks.jsonl") as out:
        old = base._copy_records(out) if base is not None else np.zeros(0, dtype=np.int64)
        new = []
        for line in lines:
            new.append(out.size)
            out.write(line)
    writer.write_array("chunk_offsets.npy", np.concatenate([old, np.asarray(new, dtype=np.int64)]))
    for name, array in bm25.arrays().items():
        writer.write_array(name, array)
    writer.write_bytes(BM25_VOCAB, json.dumps(bm25.vocab_document(), ensure_ascii=False).encode("utf-8"))
    if ann_bytes is not None:
        writer.write_bytes(ANN_FILE, ann_bytes)
    writer.finish({**manifest, "count": int(vectors.shape[0]), "updated": _now()})
