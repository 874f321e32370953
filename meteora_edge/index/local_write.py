"""Writing a local index build's generation: its spools into the generation's files, and the learned
sparse postings a build with ``lexical_scorer="sparse"`` adds beside BM25 (see :mod:`.local_index`)."""

from __future__ import annotations

import shutil
from typing import Any, BinaryIO

from ..models.sparse_index import SparseIndex, sparse_model
from .generations import GenerationWriter
from .manifest import ANN_FILE, SOURCES_FILE, utc_now
from .posting_spool import PostingSpool
from .record_spool import RecordSpool
from .sources import SourceEntry
from .table_spool import TableSpool
from .updates import write_sparse
from .vector_spool import VectorSpool

__all__ = ["write_build", "sparse_model", "sparse_postings"]


def write_build(
    writer: GenerationWriter,
    manifest: dict[str, Any],
    vectors: VectorSpool,
    records: RecordSpool,
    bm25: PostingSpool,
    ann: BinaryIO | None,
    table: TableSpool | dict[str, SourceEntry],
    sparse: SparseIndex | None = None,
) -> None:
    """Write the generation of a build from its spools: one base segment (and the ANN structure,
    serialised in the file ``ann``), its source table and the sparse postings, if any."""
    from .sources import encode_table

    with writer.stream("vectors.npy") as out:
        vectors.write_npy(out)
    with writer.stream("chunks.jsonl") as out:
        records.write_to(out)
    writer.write_array("chunk_offsets.npy", records.offsets())
    bm25.write(writer)
    if sparse is not None:
        write_sparse(writer, sparse)
    if ann is not None:
        ann.seek(0)
        with writer.stream(ANN_FILE) as out:
            shutil.copyfileobj(ann, out)  # type: ignore[misc]
    with writer.stream(SOURCES_FILE) as out:
        if isinstance(table, TableSpool):
            table.write_to(out)
        else:
            out.write(encode_table(table.values()))
    writer.finish({**manifest, "count": int(vectors.shape[0]), "updated": utc_now()})


def sparse_postings(model: Any, texts: Any, batch_size: int) -> SparseIndex:
    """Every chunk's sparse vector, encoded ``batch_size`` texts at a time, as postings."""
    vectors, batch = [], []
    for text in texts:
        batch.append(text)
        if len(batch) == batch_size:
            vectors += model.encode_sparse(batch)
            batch = []
    vectors += model.encode_sparse(batch) if batch else []
    return SparseIndex(vectors, encoder=model)
