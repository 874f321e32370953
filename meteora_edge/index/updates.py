"""Changing a local index by source: plan what to add, replace and remove, then write it.

A plan (:class:`UpdatePlan`) names the sources to remove (a replaced source is removed and
added again) and the sources to add with their documents. :func:`apply_update` writes it
under the writer lock as a new generation, in one of two ways (see
:mod:`meteora_edge.index.segments`):

* **a delta** (the usual case): the base files are hard-linked, the new chunks appended to
  the delta segment, the removed chunk ids added to ``deleted.npy``; the cost follows the
  size of the delta, not of the index;
* **a compaction** (``index compact``, an index written before format 3, or a delta past its
  threshold): every live chunk is written again as one base segment, ids renumbered.

A document whose text a stored document has (a renamed or copied file, the unchanged
records of an edited JSONL file) re-uses that document's vectors instead of being embedded.
:func:`write_chunks` is the one place where new chunks and their vectors become a delta.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import InputError, LocalIndexError
from ..models.bm25 import BM25_VOCAB, BM25Index
from ..models.encoders import EncoderLike
from ..models.sparse_index import SparseIndex, SparseVector, sparse_encoder_of
from .ann_index import build_ann
from .chunk_records import Progress, chunk_documents, embed_batches, finite, record_line
from .chunking import stored_boundaries
from .corpus import FileChoice, SourceDocument
from .generations import GenerationWriter, new_generation
from .manifest import ANN_FILE, DELETED_FILE, INDEX_FORMAT_VERSION, REQUIRED_FILES, SOURCES_FILE, utc_now
from .segments import needs_compaction
from .sources import (SourceEntry, content_hash, encode_table, file_state, group_by_source, is_under,
                      matching_sources, one_file_per_source, text_hash)

if TYPE_CHECKING:
    from pathlib import Path

    from ..models.analyzer import Analyzer
    from .segments import DeltaSegment


class IndexVersion(Protocol):
    """What planning and writing an update reads of the index version it starts from (a
    :class:`~meteora_edge.index.local_index.LocalIndex` is one): its files, counts, sources and stored rows."""

    root: Path
    folder: Path
    manifest: dict[str, Any]
    dimension: int
    base_count: int
    id_count: int
    analyzer: Analyzer
    delta: DeltaSegment
    deleted: np.ndarray
    sparse: SparseIndex | None

    @property
    def sources(self) -> dict[str, SourceEntry]: ...

    def stored_records(self, ids: Sequence[int]) -> list[dict[str, Any]]: ...

    def vectors_for(self, ids: Sequence[int], *, include_removed: bool = False) -> np.ndarray: ...

__all__ = ["IndexVersion", "SourceAddition", "UpdatePlan", "addition", "build_table", "plan_add", "plan_remove", "plan_sync",
           "apply_update", "write_chunks", "write_sparse"]

_READ_BATCH = 4096


@dataclass(frozen=True)
class SourceAddition:
    """A source to (re-)index: its key and label, its file's size and time, the hash and documents read."""

    key: str
    label: str
    size: int | None
    mtime_ns: int | None
    sha256: str
    documents: Sequence[SourceDocument]


@dataclass
class UpdatePlan:
    """What one write changes. ``op`` is recorded in the manifest's ``last_write``."""

    op: str
    remove: set[str] = field(default_factory=set)
    add: list[SourceAddition] = field(default_factory=list)
    #: sources whose file was touched but reads the same: only their size and time are updated
    touch: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    #: with ``append``, documents are added to their source's entry instead of replacing it
    append: bool = False
    #: documents left out because the index holds them already
    left_out: int = 0

    def empty(self) -> bool:
        return not (self.remove or self.add or self.touch) and self.op != "compact"


def addition(key: str, documents: Sequence[SourceDocument], state: tuple[int | None, int | None] | None = None
             ) -> SourceAddition:
    size, mtime = state if state is not None else file_state(key)
    label = documents[0].file if documents[0].file is not None else documents[0].source_id
    return SourceAddition(key, label, size, mtime, content_hash(documents), documents)


def plan_add(base: IndexVersion, documents: Sequence[SourceDocument], *, allow_duplicates: bool) -> UpdatePlan:
    """``index add``: an unchanged source is left out, a changed one replaced, a new one added
    (less its documents whose text the index holds already). With ``allow_duplicates`` every
    document is appended to its source, nothing is left out or replaced."""
    plan = UpdatePlan("add", append=allow_duplicates)
    known = {h for entry in base.sources.values() for h, _, _ in entry.documents if h}
    for key, docs in group_by_source(one_file_per_source(documents)).items():
        entry = base.sources.get(key)
        if allow_duplicates:
            plan.add.append(addition(key, docs))
            continue
        if entry is not None and entry.sha256 == content_hash(docs):
            plan.left_out += len(docs)
            continue
        if entry is not None:
            plan.remove.add(key)
        else:
            fresh = [d for d in docs if text_hash(d.text) not in known]
            plan.left_out += len(docs) - len(fresh)
            docs = fresh
        if docs:
            plan.add.append(addition(key, docs))
    return plan


def plan_remove(table: dict[str, SourceEntry], names: Sequence[str], where: str) -> UpdatePlan:
    """``index remove``: every source each name matches (see :func:`~meteora_edge.index.sources.matching_sources`).

    Raises:
        InputError: no name, or a name that matches no source of ``where`` (nothing is removed then).
    """
    if not names:
        raise InputError("name at least one source to remove")
    keys: set[str] = set()
    for name in names:
        found = matching_sources(table, name)
        if not found:
            raise InputError(f"{name} is not a source of {where} (nothing was removed)")
        keys |= found
    return UpdatePlan("remove", remove=keys)


def plan_sync(table: dict[str, SourceEntry], paths: Sequence[str | os.PathLike[str]], *, strict: bool,
              follow_links: bool, on_skip: Callable[..., Any] | None, choice: FileChoice | None = None,
              checksum: bool = False) -> UpdatePlan:
    """``index sync``: read the files under ``paths`` whose size or time differ from ``table`` (every file
    with ``checksum``: an edit that kept both is found by the hash of what it reads); add the new ones,
    replace the changed ones, touch the ones that read the same under a new size or time, and remove the
    sources under ``paths`` whose file is gone or holds no usable text. Sources outside ``paths`` stay.

    Raises:
        InputError: a named path is missing, or a file cannot be read with ``strict``.
    """
    from .corpus import read_changed

    def unchanged(key: str, state: tuple[int, int]) -> bool:
        entry = table.get(key)
        return not checksum and entry is not None and entry.sha256 is not None and (entry.size, entry.mtime_ns) == state

    documents, listed, states = read_changed(paths, unchanged=unchanged, strict=strict, on_skip=on_skip,
                                             follow_links=follow_links, choice=choice)
    out = UpdatePlan("sync")
    for key, docs in group_by_source(one_file_per_source(documents)).items():
        entry = table.get(key)
        if entry is not None and entry.sha256 == content_hash(docs):
            state = states.get(key, (None, None))
            if state != (entry.size, entry.mtime_ns):
                out.touch[key] = state
            continue
        if entry is not None:
            out.remove.add(key)
        out.add.append(addition(key, docs, states.get(key)))
    scope = [os.path.realpath(p) for p in paths if os.fspath(p) != "-"]
    for key in table:
        if key not in listed and any(is_under(key, root) for root in scope):
            out.remove.add(key)
    return out


def _reuse_map(base: IndexVersion, wanted: set[str]) -> dict[str, tuple[int, int]]:
    """The stored chunk range of each document whose text hash is in ``wanted``."""
    return {h: (lo, hi) for entry in base.sources.values() for h, lo, hi in entry.documents if h in wanted}


def apply_update(base: IndexVersion, plan: UpdatePlan, encoder: EncoderLike, *, batch_size: int,
                 progress: Progress | None) -> tuple[int, int, int, dict[str, SourceEntry]]:
    """Write ``plan`` over ``base`` (the version current under the writer lock, which the caller holds).

    Returns:
        ``(chunks added, documents added, chunks removed, the new source table)``.

    Raises:
        InputError: the plan would leave the index without chunks.
        LocalIndexError: the index cannot be written (it stays as it was).
    """
    table = dict(base.sources)
    removed = sorted(i for key in plan.remove if key in table for i in table.pop(key).chunk_ids())
    for key, (size, mtime) in plan.touch.items():
        if key in table:
            table[key] = dataclasses.replace(table[key], size=size, mtime_ns=mtime)
    documents = [d for a in plan.add for d in a.documents]
    chunking = base.manifest["chunking"]
    start = base.id_count
    texts, lines, counts = chunk_documents(documents, start, chunking["chunk_size"], chunking["overlap"],
                                           stored_boundaries(chunking))
    vectors = _vectors(base, documents, counts, texts, encoder, batch_size, progress)
    sparse = _sparse_vectors(base, texts, encoder)
    ranges = iter(_ranges(documents, counts, start))
    for item in plan.add:
        mine = tuple(r for r in (next(ranges) for _ in item.documents) if r[1] < r[2])
        old = table.get(item.key)
        if plan.append and old is not None:
            mine = old.documents + mine
        if mine:
            table[item.key] = SourceEntry(item.key, item.label, item.size, item.mtime_ns, item.sha256, mine)
    deleted = np.asarray(sorted({*base.deleted.tolist(), *removed}), dtype=np.int64)  # (np.union1d imports numpy.ma)
    total = start + len(lines)
    if total - len(deleted) == 0:
        raise InputError(f"this would remove every chunk of the index at {base.root}; remove the folder instead, "
                         "or build a new index")
    delta = base.id_count - base.base_count + len(lines)
    compact = (plan.op == "compact" or base.manifest["format_version"] < INDEX_FORMAT_VERSION
               or needs_compaction(base.base_count, delta, len(deleted)))
    manifest = _manifest(base, plan.op, len(lines))
    with new_generation(base.root) as writer:
        if compact:
            table = _compact(writer, base, manifest, lines, texts, vectors, deleted, table, sparse)
        else:
            write_chunks(writer, base, manifest, lines, texts, vectors, deleted, table, sparse)
    return len(lines), sum(1 for n in counts if n), len(removed), table


def _ranges(documents: Sequence[SourceDocument], counts: Sequence[int], start: int) -> list[tuple[str, int, int]]:
    out, at = [], start
    for document, n in zip(documents, counts):
        out.append((text_hash(document.text), at, at + n))
        at += n
    return out


def _vectors(base: IndexVersion, documents: Sequence[SourceDocument], counts: Sequence[int], texts: Sequence[str],
             encoder: EncoderLike, batch_size: int, progress: Progress | None) -> np.ndarray:
    """The new chunks' vectors: copied where a stored document has the same text (and chunk count), else embedded."""
    reuse = _reuse_map(base, {text_hash(d.text) for d in documents})
    out = np.zeros((len(texts), base.dimension), dtype=np.float32)
    embed_rows: list[int] = []
    at = 0
    for document, n in zip(documents, counts):
        found = reuse.get(text_hash(document.text))
        if found is not None and found[1] - found[0] == n:
            out[at : at + n] = base.vectors_for(range(*found))
        else:
            embed_rows.extend(range(at, at + n))
        at += n
    if embed_rows:
        out[embed_rows] = embed_batches(encoder, [texts[i] for i in embed_rows], batch_size, progress)
    return out


def write_sparse(writer: GenerationWriter, sparse: SparseIndex) -> None:
    """Write the learned-sparse postings (see :data:`~meteora_edge.index.manifest.SPARSE_FILES`)."""
    for name, array in sparse.arrays().items():
        writer.write_array(name, array)


def _sparse_vectors(base: IndexVersion, texts: Sequence[str], encoder: EncoderLike | None) -> list[SparseVector] | None:
    """The new chunks' learned-sparse vectors when the index holds sparse postings (None when it does not).

    Raises:
        LocalIndexError: new chunks, and no sparse model or another one than the one that built the index.
    """
    if base.sparse is None:
        return None
    if not texts:
        return []
    model = sparse_encoder_of(encoder)
    if model is None or model.identity != base.sparse.encoder_identity:
        raise LocalIndexError(
            f"index {base.root} holds the postings of the sparse model {base.sparse.encoder_identity!r}; add to it with "
            f"the bundle that holds that model (given: {getattr(model, 'identity', 'none')}), or rebuild the index")
    return model.encode_sparse(list(texts))


def _manifest(base: IndexVersion, op: str, chunks: int) -> dict[str, Any]:
    return {
        **{k: base.manifest[k] for k in ("format", "encoder", "chunking", "created")},
        **({"analyzer": base.manifest["analyzer"]} if "analyzer" in base.manifest else {}),
        **({"ann": base.manifest["ann"]} if "ann" in base.manifest else {}),
        **({"lexical": base.manifest["lexical"]} if "lexical" in base.manifest else {}),
        "format_version": INDEX_FORMAT_VERSION,
        "last_write": {"op": op, "chunks": chunks},
    }


def _write_lines(writer: GenerationWriter, name: str, prefix: bytes, prefix_offsets: np.ndarray,
                 lines: Sequence[bytes]) -> np.ndarray:
    """Write ``prefix`` then ``lines`` to ``name``; return every line's offset."""
    offsets = [np.asarray(prefix_offsets, dtype=np.int64)]
    with writer.stream(name) as out:
        out.write(prefix)
        new = []
        for line in lines:
            new.append(out.size)
            out.write(line)
    return np.concatenate([*offsets, np.asarray(new, dtype=np.int64)])


def _write_bm25(writer: GenerationWriter, prefix: str, bm25: BM25Index) -> None:
    for name, array in bm25.arrays().items():
        writer.write_array(prefix + name, array)
    writer.write_bytes(prefix + BM25_VOCAB, json.dumps(bm25.vocab_document(), ensure_ascii=False).encode("utf-8"))


def write_chunks(writer: GenerationWriter, base: IndexVersion, manifest: dict[str, Any], lines: Sequence[bytes],
                 texts: Sequence[str], vectors: np.ndarray, deleted: np.ndarray,
                 table: dict[str, SourceEntry], sparse: list[SparseVector] | None = None) -> None:
    """Write a generation that keeps ``base``'s base files (linked) and appends ``lines`` with their
    ``vectors`` to its delta segment; ``deleted`` and ``table`` are the new removed ids and sources.
    The sparse postings (when the index has them) cover every id, so they are written whole, extended by ``sparse``."""
    for name in (*REQUIRED_FILES, *((ANN_FILE,) if "ann" in base.manifest else ())):
        writer.link(name, base.folder / name, base.manifest["files"][name])
    old = base.delta
    if len(old) or len(lines):
        writer.write_array("delta_vectors.npy", np.concatenate([old.vectors, vectors]).astype(np.float32))
        offsets = _write_lines(writer, "delta_chunks.jsonl", old.chunk_bytes(), old.offsets, lines)
        writer.write_array("delta_chunk_offsets.npy", offsets)
        _write_bm25(writer, "delta_", old.bm25.extend_texts(texts))
    if base.sparse is not None:
        write_sparse(writer, base.sparse.extend(sparse or []))
    _finish(writer, manifest, base.base_count, base.id_count - base.base_count + len(lines), deleted, table)


def _finish(writer: GenerationWriter, manifest: dict[str, Any], base_count: int, delta: int, deleted: np.ndarray,
            table: dict[str, SourceEntry]) -> None:
    if len(deleted):
        writer.write_array(DELETED_FILE, np.asarray(deleted, dtype=np.int64))
    writer.write_bytes(SOURCES_FILE, encode_table(table.values()))
    writer.finish({**manifest, "count": base_count + delta, "updated": utc_now(),
                   "segments": {"base": base_count, "delta": delta, "deleted": int(len(deleted))}})


def _compact(writer: GenerationWriter, base: IndexVersion, manifest: dict[str, Any], lines: Sequence[bytes],
             texts: Sequence[str], vectors: np.ndarray, deleted: np.ndarray, table: dict[str, SourceEntry],
             sparse: list[SparseVector] | None = None) -> dict[str, SourceEntry]:
    """Write every live chunk (the old ones, then ``lines``) as one base segment, ids renumbered."""
    total = base.id_count + len(lines)
    live = np.ones(total, dtype=bool)
    live[deleted] = False
    new_id = np.cumsum(live) - 1
    old_live = np.flatnonzero(live[: base.id_count])
    all_vectors = np.concatenate([base.vectors_for(old_live), vectors[live[base.id_count:]]]).astype(np.float32)
    kept: list[bytes] = []
    kept_texts: list[str] = []
    for lo in range(0, len(old_live), _READ_BATCH):
        for record in base.stored_records(old_live[lo : lo + _READ_BATCH]):
            record = finite({**record, "id": int(new_id[record["id"]])})
            kept.append(record_line(record))
            kept_texts.append(record["text"])
    for i, line in enumerate(lines):
        if live[base.id_count + i]:
            record = json.loads(line)
            record["id"] = int(new_id[base.id_count + i])
            kept.append(record_line(record))
            kept_texts.append(texts[i])
    writer.write_array("vectors.npy", all_vectors)
    writer.write_array("chunk_offsets.npy", _write_lines(writer, "chunks.jsonl", b"", np.zeros(0), kept))
    _write_bm25(writer, "", BM25Index.from_texts(kept_texts, analyzer=base.analyzer))
    if base.sparse is not None:
        write_sparse(writer, base.sparse.extend(sparse or []).subset(np.flatnonzero(live)))
    if "ann" in manifest:
        writer.write_bytes(ANN_FILE, build_ann(all_vectors, manifest["ann"]))
    renumbered = {key: dataclasses.replace(entry, documents=tuple(
        (h, int(new_id[lo]), int(new_id[hi - 1]) + 1) for h, lo, hi in entry.documents)) for key, entry in table.items()}
    _finish(writer, manifest, len(kept), 0, np.zeros(0, dtype=np.int64), renumbered)
    return renumbered


def build_table(documents: Sequence[SourceDocument], counts: Sequence[int]) -> dict[str, SourceEntry]:
    """The source table of a build: each source's documents and the chunk ids they made."""
    at, per_document = 0, {}
    for document, n in zip(documents, counts):
        per_document[id(document)] = (text_hash(document.text), at, at + n)
        at += n
    table = {}
    for key, docs in group_by_source(documents).items():
        made = addition(key, docs)
        ranges = tuple(r for r in (per_document[id(d)] for d in docs) if r[1] < r[2])
        if ranges:
            table[key] = SourceEntry(key, made.label, made.size, made.mtime_ns, made.sha256, ranges)
    return table
