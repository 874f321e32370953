"""The local corpus index: chunk store, normalised vectors and BM25, durable and safe to share.

One version of an index is a generation folder (see :mod:`meteora_edge.index.generations`)::

    manifest.json        format, encoder identity and dimension, chunking, lexical analyser, counts, file hashes
    vectors.npy          float32 (n, dim), L2-normalised, memory-mapped on load
    chunks.jsonl         one chunk record per line (id, text, sha256 of the text, source, offsets, metadata)
    chunk_offsets.npy    byte offset of every line, so records load on demand
    bm25_*.npy/.json     the BM25 index (see :mod:`meteora_edge.models.bm25`)
    sparse_*.npy         optional: learned-sparse postings over every chunk id, beside BM25, when the index was
                         built with ``lexical_scorer="sparse"`` (see :mod:`meteora_edge.models.sparse_index`)
    ann.faiss            optional: an ANN structure for kNN (see :mod:`meteora_edge.index.ann_index`)
    sources.json         format 3: the source table (see :mod:`meteora_edge.index.sources`)
    delta_*, deleted.npy format 3: chunks added since the base files and removed ids
                         (see :mod:`meteora_edge.index.segments` and :mod:`meteora_edge.index.updates`)

:meth:`LocalIndex.build` and :meth:`LocalIndex.add` hold the index's writer lock while
they read its state and write a new generation, so concurrent writers queue up and none
loses the other's chunks. A loaded index keeps its files open and reads only them, so it
stays consistent while writers replace the index. Loading checks the manifest against its
schema, every file's size and sha256, the array dtypes and shapes, and (given an encoder)
that the same encoder made the index. What an opened version answers (records, search,
vectors, :meth:`~LocalIndex.info`) is in :mod:`meteora_edge.index.local_reads`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..models.analyzer import DEFAULT_ANALYZER, LEGACY_ANALYZER, Analyzer, analyzer_from_record
from ..models.bm25 import BM25Index
from ..models.sparse_index import SPARSE_ARRAYS, SparseIndex, sparse_encoder_of
from .ann_index import AnnConfig, AnnIndex, ann_entry, write_ann
from .bundle_record import bundle_record
from .chunk_records import Progress, chunk_lines, embed_into
from .corpus import FileChoice, SourceDocument
from .manifest import (ANN_FILE, DELETED_FILE, INDEX_FORMAT, INDEX_FORMAT_VERSION, MANIFEST, REQUIRED_FILES,
                       SOURCES_FILE, utc_now)
from .segments import CombinedBM25, DeltaSegment, check_offsets, read_bm25, read_delta
from .sources import SourceEntry, decode_table, one_file_per_source, table_from_records
from .updates import UpdatePlan, apply_update, build_table, plan_add, plan_remove, plan_sync
from .chunking import DEFAULT_BOUNDARIES, check_chunking, count_words
from .generations import live_generation, new_generation, target_state, writer_lock
from .generations import lock_timeout as resolve_lock_timeout
from .snapshot import Snapshot, open_snapshot, read_npy, read_small_file
from .posting_spool import PostingSpool
from .record_spool import RecordSpool
from .table_spool import TableSpool
from .vector_spool import VectorSpool, spool_file, spool_folder
from ..models.encoders import EncoderLike, encoder_id
from ..errors import ConfigError, InputError, LocalIndexError
from .local_reads import LocalReads, RowReader, reopened
from .local_write import sparse_model, sparse_postings, write_build

__all__ = ["LocalIndex", "INDEX_FORMAT", "INDEX_FORMAT_VERSION"]

_COPY_BLOCK = 1 << 20


class LocalIndex(LocalReads):
    """One opened version of a local index. Use :meth:`build`, :meth:`load` and :meth:`add`.

    Example:
        >>> import shutil, tempfile
        >>> from meteora_edge import HashingEncoder
        >>> folder = tempfile.mkdtemp()
        >>> docs = [SourceDocument("a", "Either party may terminate on ninety days notice.")]
        >>> index = LocalIndex.build(f"{folder}/ix", docs, HashingEncoder(), chunk_size=4, overlap=0)
        >>> index.records([0])[0]["text"]
        'Either party may terminate'
        >>> shutil.rmtree(folder)
    """

    def __init__(self, snapshot: Snapshot, previous: LocalIndex | None = None) -> None:
        """Build the arrays from an opened snapshot (use :meth:`load`); the base segment of ``previous``
        is re-used when this version links the same base files (what an update writes)."""
        manifest, handles, where = snapshot.manifest, snapshot.handles, snapshot.folder
        count, dim = manifest["count"], manifest["encoder"]["dimension"]
        segments = manifest.get("segments") or {"base": count, "delta": 0, "deleted": 0}
        base = segments["base"]
        self.root = snapshot.root
        self.folder = where
        self.generation = snapshot.generation
        #: What the :meth:`add` call that returned this version wrote (0 and 0 for any other version).
        self.added_chunks = 0
        self.added_documents = 0
        #: Chunks the write that returned this version removed (replaced or deleted sources), and documents left out.
        self.removed_chunks = 0
        self.left_out_documents = 0
        self.manifest = manifest
        self.dimension = int(dim)
        self.base_count, self.id_count = int(base), int(count)
        same_base = previous is not None and previous.base_count == base and all(
            previous.manifest["files"].get(name) == manifest["files"][name]
            for name in (*REQUIRED_FILES, *((ANN_FILE,) if "ann" in manifest else ())))
        chunks: BinaryIO = handles["chunks.jsonl"]
        self._chunk_bytes = manifest["files"]["chunks.jsonl"]["size"]
        if same_base:
            assert previous is not None
            self._base_vectors, self.offsets, self.analyzer = previous._base_vectors, previous.offsets, previous.analyzer
            self._vector_rows = previous._vector_rows
            base_bm25 = previous.base_bm25
        else:
            self._base_vectors = read_npy(handles["vectors.npy"], dtype=np.dtype("<f4"), shape=(base, dim), mmap=True,
                                          where=str(where / "vectors.npy"))
            self._vector_rows = RowReader.of(handles["vectors.npy"], self._base_vectors)
            self.offsets = read_npy(handles["chunk_offsets.npy"], dtype=np.dtype("<i8"), shape=(base,), mmap=False,
                                    where=str(where / "chunk_offsets.npy"))
            check_offsets(self.offsets, self._chunk_bytes, chunks, where)
            self.analyzer = (analyzer_from_record(manifest["analyzer"], where=f"index {where}", error=LocalIndexError)
                             if "analyzer" in manifest else LEGACY_ANALYZER)
            base_bm25 = read_bm25(handles, "", where, self.analyzer)
            if base_bm25.n_docs != base:
                raise LocalIndexError(f"index {where}: BM25 covers {base_bm25.n_docs} chunks, vectors {base}; "
                                      "rebuild it")
        #: The base segment's own BM25 (its statistics alone); :attr:`bm25` scores the whole index.
        self.base_bm25 = base_bm25
        self.delta = DeltaSegment.empty(self.dimension, base_bm25)
        if segments["delta"]:
            self.delta = read_delta(handles, manifest, segments["delta"], dim, where, self.analyzer)
        self.deleted = np.zeros(0, dtype=np.int64)
        if segments["deleted"]:
            self.deleted = read_npy(handles[DELETED_FILE], dtype=np.dtype("<i8"), shape=(segments["deleted"],),
                                    mmap=False, where=str(where / DELETED_FILE))
            if np.any(np.diff(self.deleted) <= 0) or self.deleted[0] < 0 or self.deleted[-1] >= count:
                raise LocalIndexError(f"{where / DELETED_FILE} is corrupt (ids not sorted or outside the index); "
                                      "rebuild the index")
        self._live = None if not len(self.deleted) else np.ones(count, dtype=bool)
        if self._live is not None:
            self._live[self.deleted] = False
        self.bm25: BM25Index | CombinedBM25 = base_bm25
        if segments["delta"] or segments["deleted"]:
            self.bm25 = CombinedBM25(base_bm25, self.delta.bm25, self.deleted)
        #: "sparse" when the index holds learned-sparse postings beside BM25 (queries are then scored by them), else "bm25"
        self.lexical_scorer = "sparse" if "lexical" in manifest else "bm25"
        self.sparse: SparseIndex | None = None
        if "lexical" in manifest:
            arrays = [read_npy(handles[name], dtype=dtype, shape=None, mmap=True, where=str(where / name))
                      for name, dtype in SPARSE_ARRAYS]
            self.sparse = SparseIndex.from_arrays(*arrays, n_docs=count, where=f"index {where}")
            self.sparse.encoder_identity = manifest["lexical"]["model"]
            known = previous.sparse if previous is not None else None
            if known is not None and known.encoder is not None and known.encoder_identity == self.sparse.encoder_identity:
                self.sparse.encoder = known.encoder  # a version an update wrote keeps the model its writer was opened with
        self._sources: dict[str, SourceEntry] | None = None
        # the source table is read when asked (sync, add, info), not at every load
        self._sources_file = reopened(handles[SOURCES_FILE], self) if SOURCES_FILE in handles else None
        self.ann: AnnIndex | None = None
        if same_base:
            assert previous is not None
            self.ann = previous.ann
        elif "ann" in manifest:
            self.ann = AnnIndex(handles[ANN_FILE], manifest["ann"], count=base, dimension=dim,
                                where=str(where / ANN_FILE))
        self._chunks = reopened(chunks, self)
        if not same_base:
            self._check_chunking(where)

    @property
    def vectors(self) -> np.ndarray:
        """Every stored chunk's vector, removed ones included (the base segment's are memory-mapped)."""
        if not len(self.delta):
            return self._base_vectors
        return np.concatenate([np.asarray(self._base_vectors), self.delta.vectors])

    @property
    def sources(self) -> dict[str, SourceEntry]:
        """The source table: key (resolved path) → :class:`~meteora_edge.index.sources.SourceEntry`.

        An index written before format 3 has none stored: it is rebuilt from the records (once per opened version).
        """
        if self._sources is None and self._sources_file is not None:
            raw = os.pread(self._sources_file.fileno(), self.manifest["files"][SOURCES_FILE]["size"], 0)
            self._sources = decode_table(raw, str(self.folder / SOURCES_FILE), count=self.id_count)
        if self._sources is None:
            self._sources = table_from_records(
                r for lo in range(0, self.id_count, 4096)
                for r in self.stored_records(range(lo, min(lo + 4096, self.id_count))))
        return self._sources

    def live_ids(self) -> np.ndarray:
        """The ids of the chunks that were not removed, in order."""
        return np.arange(self.id_count) if self._live is None else np.flatnonzero(self._live)

    def _check_chunking(self, where: Path) -> None:
        """The manifest's chunk_size must hold the first and last stored chunks (a cheap check that
        it was not edited: add chunks new documents with it)."""
        size = self.manifest["chunking"]["chunk_size"]
        for record in self.stored_records(sorted({0, self.base_count - 1})):
            words = count_words(record["text"])
            if words > size:
                raise LocalIndexError(
                    f"{where / MANIFEST} is corrupt: chunking.chunk_size is {size}, but chunk {record['id']} holds "
                    f"{words} words; rebuild the index")

    def __len__(self) -> int:
        """The number of chunks (removed ones excluded; ids run to :attr:`id_count`)."""
        return self.id_count - int(len(self.deleted))

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
        boundaries: str = DEFAULT_BOUNDARIES,
        batch_size: int = 64,
        overwrite: bool = False,
        progress: Progress | None = None,
        ann: AnnConfig | None = None,
        bundle: str | os.PathLike[str] | None = None,
        lock_timeout: float | None = None,
        analyzer: Analyzer = DEFAULT_ANALYZER,
        lexical_scorer: str = "bm25",
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
        analysed the same way. ``chunk_size``, ``overlap`` and ``boundaries`` are as
        :func:`~meteora_edge.index.chunking.chunk_text`'s and recorded too, so :meth:`add` cuts alike.
        ``lexical_scorer="sparse"`` also encodes every chunk with the learned
        sparse model ``encoder`` carries (a bundle with a ``sparse_encoder``) and stores its postings
        beside BM25; the manifest records the model, and queries are then scored by it.

        Returns:
            The new index, opened.

        Raises:
            InputError: no documents, bad text or metadata, or ``out`` is not free to write.
            ConfigError: bad chunking or batch settings.
            LocalIndexError: the folder cannot be written (the previous index stays).
            MissingExtraError: ``ann`` is given and faiss-cpu is not installed.
        """
        target = Path(out)
        documents = one_file_per_source(documents)
        wait = resolve_lock_timeout(lock_timeout)  # a bad value fails before the embedding, not after it
        if target_state(target) == "index" and not overwrite:
            raise InputError(f"{target} already exists; use 'add' to append or 'overwrite' to rebuild")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        check_chunking(chunk_size, overlap, boundaries)
        if not isinstance(analyzer, Analyzer):
            raise ConfigError(f"analyzer must be an Analyzer, got {type(analyzer).__name__}")
        model = sparse_model(lexical_scorer, encoder)
        record = bundle_record(bundle)
        folder = spool_folder(target)
        # the records, BM25 postings and vectors go to temporary files as they are made, so memory
        # does not grow with the corpus (beyond 16 bytes a chunk and the vocabulary)
        with RecordSpool(folder, where=target) as records, PostingSpool(analyzer, folder, where=target) as bm25, \
                TableSpool(folder, where=target) as sources:
            counts = []
            for document in documents:
                first = len(records)
                for _, text, line in chunk_lines([document], first, chunk_size, overlap, boundaries):
                    records.append(line, len(text))
                    bm25.add_text(text)
                counts.append(len(records) - first)
                sources.add(document, first, len(records))
            if not len(records):
                raise InputError("the documents hold no text to index")
            # documents come source by source (else the table is grouped in memory)
            table = sources if sources.grouped() else build_table(documents, counts)
            with VectorSpool(len(records), folder, where=target) as vectors, spool_file(folder, "ann") as ann_file:
                embed_into(vectors, encoder, records.texts(), batch_size, progress)
                sparse = None if model is None else sparse_postings(model, records.texts(), batch_size)
                entry = ann_entry(ann, len(records)) if ann is not None else None
                if entry is not None:  # built before the lock is taken (it is the slow part), kept on disk
                    write_ann(vectors, entry, ann_file)
                manifest = {
                    "format": INDEX_FORMAT,
                    "format_version": INDEX_FORMAT_VERSION,
                    "encoder": {"id": encoder_id(encoder), "dimension": int(vectors.shape[1]),
                                **({"bundle": record} if record else {})},
                    "chunking": {"chunk_size": chunk_size, "overlap": chunk_size // 10 if overlap is None else overlap,
                                 "boundaries": boundaries},
                    "analyzer": analyzer.record(),
                    "created": utc_now(),
                    "last_write": {"op": "build", "chunks": len(records)},
                    "segments": {"base": len(records), "delta": 0, "deleted": 0},
                    **({"ann": entry} if entry is not None else {}),
                    **({"lexical": {"scorer": "sparse", "model": sparse.encoder_identity}} if sparse else {}),
                }
                with writer_lock(target, create=True, timeout=wait):
                    if target_state(target) == "index" and not overwrite:  # another build got there first
                        raise InputError(f"{target} already exists; use 'add' to append or 'overwrite' to rebuild")
                    with new_generation(target) as writer:
                        write_build(writer, manifest, vectors, records, bm25, ann_file if entry else None, table, sparse)
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
        """Add documents to the index at ``self.root`` by source; return the new version, opened.

        Under the writer lock the version current at that moment (which may be newer than
        ``self``) is planned against, never a stale copy. Each document's source (its file, see
        :mod:`meteora_edge.index.sources`) decides: an unchanged source is left out, a changed one
        **replaces** its old chunks, a new one is added less the documents whose text the index
        holds already. With ``allow_duplicates`` every document is appended to its source. When
        nothing changes, that version is returned and nothing is written. The returned version's
        ``added_chunks``, ``added_documents``, ``removed_chunks`` and ``left_out_documents`` say
        what this call wrote (0 when another writer had added the same documents first).
        The new chunks go to the delta segment (see :mod:`meteora_edge.index.segments`): an
        ANN structure keeps covering the base and the delta is searched exactly beside it
        until a compaction. ``lock_timeout`` is as in :meth:`build`.

        Raises:
            InputError: the documents hold no text, or bad text or metadata.
            LocalIndexError: another encoder built the index, the index is damaged, or it
                cannot be written (then it stays as it was).
        """
        def plan(base: LocalIndex) -> UpdatePlan:
            return plan_add(base, documents, allow_duplicates=allow_duplicates)

        if not documents and allow_duplicates:
            raise InputError("the documents hold no text to add")
        return self._update(plan, encoder, batch_size=batch_size, progress=progress, lock_timeout=lock_timeout,
                            require_text=True)

    def remove(self, sources: Sequence[str], *, lock_timeout: float | None = None) -> LocalIndex:
        """Remove every chunk of the named sources; return the new version, opened.

        A source is named by its file's path (absolute, or relative to the current folder), by the
        label its records carry (the path as it was given), or by a folder: every source under it.
        The chunks stay stored (marked removed) until the next compaction.

        Raises:
            InputError: a name that matches no source of the index, or removing every chunk.
            LocalIndexError: the index cannot be written (it stays as it was).
        """
        if not sources:
            raise InputError("name at least one source to remove")

        def plan(base: LocalIndex) -> UpdatePlan:
            return plan_remove(base.sources, sources, f"the index at {base.root}")

        return self._update(plan, None, batch_size=64, progress=None, lock_timeout=lock_timeout)

    def sync(
        self,
        paths: Sequence[str | os.PathLike[str]],
        encoder: EncoderLike,
        *,
        batch_size: int = 64,
        progress: Progress | None = None,
        strict: bool = False,
        follow_links: bool = False,
        on_skip: Any = None,
        choice: FileChoice | None = None,
        lock_timeout: float | None = None,
        checksum: bool = False,
    ) -> LocalIndex:
        """Make the index follow the files and folders in ``paths``; return the new version, opened.

        New files are added, changed ones replaced, and the sources under ``paths`` whose file is
        gone (or holds no usable text any more) removed. A file whose size and modification time
        match the source table is not read again (with ``checksum``, every file is read and compared
        by the hash of its content: for edits that keep both); one that was touched but reads the same
        only gets its time updated. A renamed or copied file re-uses the stored vectors of the same text.
        Index folders are never read (see :func:`~meteora_edge.index.corpus.read_changed`).
        The returned version's ``added_chunks``, ``added_documents`` and ``removed_chunks`` say what
        changed; when nothing did, the current version is returned and nothing is written.

        Raises:
            InputError: a named path is missing, a file cannot be read with ``strict``, or the
                sync would leave no chunk.
            LocalIndexError: another encoder built the index, or it cannot be written.
        """
        def plan(base: LocalIndex) -> UpdatePlan:
            return plan_sync(base.sources, paths, strict=strict, follow_links=follow_links, on_skip=on_skip,
                             choice=choice, checksum=checksum)

        return self._update(plan, encoder, batch_size=batch_size, progress=progress, lock_timeout=lock_timeout)

    def compact(self, *, lock_timeout: float | None = None) -> LocalIndex:
        """Write the index again as one segment without its removed chunks (ids renumbered).

        Updates do this on their own once the delta and the removed chunks pass a threshold
        (see :func:`~meteora_edge.index.segments.needs_compaction`). Returns the new version, opened.
        """
        return self._update(lambda base: UpdatePlan("compact"), None, batch_size=64, progress=None,
                            lock_timeout=lock_timeout)

    def _update(self, make_plan: Any, encoder: EncoderLike | None, *, batch_size: int, progress: Progress | None,
                lock_timeout: float | None, require_text: bool = False) -> LocalIndex:
        """Under the writer lock: open the current version, plan against it, write the plan."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        if encoder is not None:
            self._check_encoder(encoder)
        with writer_lock(self.root, create=False, timeout=resolve_lock_timeout(lock_timeout)):
            base = self if self._still_current() else LocalIndex.load(self.root, encoder=encoder, verify=False)
            plan = make_plan(base)
            if plan.empty():
                base.added_chunks = base.added_documents = base.removed_chunks = 0
                base.left_out_documents = plan.left_out
                return base  # nothing changed: nothing to write
            if require_text and not plan.add and not plan.remove:
                raise InputError("the documents hold no text to add")
            added, documents, removed, table = apply_update(base, plan, encoder, batch_size=batch_size,
                                                            progress=progress)
            grown = LocalIndex.load(self.root, encoder=encoder, verify=False, previous=base)
            grown._sources = table
            grown.added_chunks, grown.added_documents, grown.removed_chunks = added, documents, removed
            grown.left_out_documents = plan.left_out
            return grown

    def _still_current(self) -> bool:
        """Whether the pointer still names this version and its manifest still reads the same (then an
        update plans against it without opening the index again; the files it links are checked as linked)."""
        if self.generation is None or live_generation(self.root) != self.generation:
            return False
        try:
            return bool(json.loads(read_small_file(self.folder / MANIFEST)) == self.manifest)
        except (OSError, ValueError):
            return False

    # ----------------------------------------------------------------- reading
    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, encoder: EncoderLike | None = None, verify: bool = True,
        previous: LocalIndex | None = None,
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
            index = cls(snapshot, previous)
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
        model = sparse_encoder_of(encoder)
        if self.sparse is not None and model is not None:
            if model.identity != self.sparse.encoder_identity:
                raise LocalIndexError(
                    f"index {self.root} holds the postings of the sparse model {self.sparse.encoder_identity!r}, "
                    f"not {model.identity!r}; use the same --bundle or rebuild the index")
            self.sparse.encoder = model
