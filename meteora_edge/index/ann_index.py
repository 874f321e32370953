"""An optional approximate-nearest-neighbour structure inside a local index (faiss; extra ``[ann]``).

Exact kNN reads every vector: at a million 384-dimensional chunks that is 1.5 GB per
query. ``index build --ann ivf`` (or ``hnsw``) adds a faiss structure over 8-bit
scalar-quantised copies of the vectors (a quarter of their size):

* ``ivf``  — ``IVF{nlist},SQ8``: the vectors are clustered into ``nlist ≈ 4·√n`` lists
  (k-means on a sample); a query scans the ``probe`` lists nearest to it.
* ``hnsw`` — ``HNSW32,SQ8``: a navigable small-world graph; ``probe`` is its ``efSearch``.

A search asks the structure for ``max(4·k, 64)`` candidates, then computes their exact
cosines from the index's float32 vectors and keeps the ``k`` best: the scores are exact,
only recall is approximate (``benchmarks/scale.py`` reports recall against exact search).

The structure is stored as ``ann.faiss`` (faiss's own serialisation) in the generation
folder, listed in the manifest with its sha256 and size like every other file, and
described by the manifest's ``ann`` entry (kind, faiss factory string, probe). It is
deserialised from the bytes read through the snapshot's open (and checked) file, never
reopened by path, and must hold exactly the index's vectors.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from ..errors import ConfigError, LocalIndexError, MissingExtraError
from .vector_spool import VectorSpool

__all__ = ["ANN_KINDS", "EXACT_BELOW", "AnnConfig", "AnnIndex", "ann_entry", "build_ann", "write_ann", "require_faiss"]

ANN_KINDS = ("ivf", "hnsw")
#: Below this many chunks :meth:`LocalIndex.search` stays exact even when the index has an ANN
#: structure: exact search then reads at most ~30 MB and never misses.
EXACT_BELOW = 20_000
_HNSW_M = 32
_HNSW_EF_CONSTRUCTION = 80
_HNSW_EF_SEARCH = 256
_TRAIN_PER_LIST = 64  # k-means sample: this many vectors per IVF list (faiss asks for at least 39)
_ADD_BLOCK = 65_536
_SEED = 1234


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MissingExtraError("faiss-cpu", "ann") from None
    return faiss


def require_faiss() -> None:
    """Check that the ``ann`` extra is installed (before any slow work starts).

    Raises:
        MissingExtraError: faiss-cpu is not installed.
    """
    _faiss()


@dataclass(frozen=True)
class AnnConfig:
    """Which ANN structure ``index build`` adds; pass by keyword.

    Args:
        kind: ``"ivf"`` or ``"hnsw"``.
        probe: IVF lists scanned per query (``nprobe``) or HNSW's ``efSearch``; ``None``
            chooses from the index size (IVF: ``max(8, nlist / 16)``, about 6 % of the vectors;
            HNSW: 256). On ``benchmarks/scale.py``'s corpus these give recall@50 against exact
            search of about 0.96 (IVF) and 0.8 (HNSW) at 100k chunks, 0.97 and 0.6 at 1M.
    """

    kind: str = "ivf"
    probe: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ANN_KINDS:
            raise ConfigError(f"ann kind must be one of {', '.join(ANN_KINDS)}, got {self.kind!r}")
        if self.probe is not None and (isinstance(self.probe, bool) or not isinstance(self.probe, int)
                                       or not 1 <= self.probe <= 1 << 20):
            raise ConfigError(f"ann probe must be an integer in [1, {1 << 20}] or None, got {self.probe!r}")


def ann_entry(config: AnnConfig, count: int) -> dict[str, Any]:
    """The manifest's ``ann`` entry for an index of ``count`` chunks: kind, faiss factory, probe."""
    if config.kind == "hnsw":
        return {"kind": "hnsw", "factory": f"HNSW{_HNSW_M},SQ8", "probe": config.probe or _HNSW_EF_SEARCH}
    lists = max(1, min(round(4 * math.sqrt(count)), count // 39, 65_536))
    probe = config.probe or min(lists, max(8, math.ceil(lists / 16)))
    return {"kind": "ivf", "factory": f"IVF{lists},SQ8", "probe": probe}


def build_ann(vectors: np.ndarray | VectorSpool, entry: dict[str, Any]) -> bytes:
    """Train and fill the structure ``entry`` describes over ``vectors`` (float32, L2-normalised).

    Returns:
        faiss's serialisation of the structure.

    Raises:
        MissingExtraError: faiss-cpu is not installed.
    """
    return bytes(_faiss().serialize_index(_structure(vectors, entry)))


def write_ann(vectors: np.ndarray | VectorSpool, entry: dict[str, Any], out: Any) -> None:
    """:func:`build_ann`, its serialisation streamed to ``out`` (anything with ``.write``) instead of
    returned, so it is never held twice (a quarter of the vectors' size for SQ8)."""
    faiss = _faiss()
    structure = _structure(vectors, entry)

    def write(data: bytes) -> int:
        out.write(data)
        return len(data)

    faiss.write_index(structure, faiss.PyCallbackIOWriter(write))


def _structure(vectors: np.ndarray | VectorSpool, entry: dict[str, Any]) -> Any:
    """The trained and filled faiss structure (vectors read a block at a time from a spool)."""
    faiss = _faiss()
    index = faiss.index_factory(int(vectors.shape[1]), entry["factory"], faiss.METRIC_INNER_PRODUCT)
    if entry["kind"] == "hnsw":
        faiss.downcast_index(index).hnsw.efConstruction = _HNSW_EF_CONSTRUCTION
        sample_size = 100_000
    else:
        sample_size = faiss.extract_index_ivf(index).nlist * _TRAIN_PER_LIST
    rng = np.random.default_rng(_SEED)
    sample = np.sort(rng.choice(len(vectors), size=min(sample_size, len(vectors)), replace=False))
    index.train(vectors[sample])  # faiss copies its input to contiguous float32 itself
    del sample
    _add(index, vectors)
    return index


def _add(index: Any, vectors: np.ndarray | VectorSpool) -> None:
    for lo in range(0, len(vectors), _ADD_BLOCK):
        index.add(vectors[lo : lo + _ADD_BLOCK])  # faiss copies each block to contiguous float32 itself


class AnnIndex:
    """A loaded ANN structure; proposes candidate ids for a query.

    Args:
        data: the bytes of ``ann.faiss``, or the file open for reading. From an open file on Linux
            the bulk of the structure (IVF lists, HNSW codes) is memory-mapped from that very file
            (through ``/proc/self/fd``), so a select over a million chunks reads only the lists it
            probes instead of holding them all (a quarter of the vectors' size).
        entry: the manifest's ``ann`` entry.
        count / dimension: what the structure must hold.
        where: names the file in error messages.

    Raises:
        MissingExtraError: faiss-cpu is not installed.
        LocalIndexError: the bytes are not a faiss structure of that kind, size and dimension.
    """

    def __init__(self, data: bytes | BinaryIO, entry: dict[str, Any], *, count: int, dimension: int,
                 where: str) -> None:
        faiss = _faiss()
        self.entry = entry
        mapped = None if isinstance(data, (bytes, bytearray)) else f"/proc/self/fd/{data.fileno()}"
        if mapped is not None and not os.path.exists(mapped):
            data, mapped = data.read(), None  # type: ignore[union-attr]
        try:
            if mapped is not None:
                flag = faiss.IO_FLAG_MMAP if entry["kind"] == "ivf" else faiss.IO_FLAG_MMAP_IFC
                index = faiss.read_index(mapped, flag)
            else:
                index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))  # type: ignore[arg-type]
        except (RuntimeError, ValueError) as exc:
            reason = str(exc).strip().splitlines()[-1][:120] if str(exc).strip() else type(exc).__name__
            raise LocalIndexError(f"{where} is not a readable faiss structure ({reason}); rebuild the index") from None
        inner = faiss.downcast_index(index)
        expected = faiss.IndexHNSW if entry["kind"] == "hnsw" else faiss.IndexIVF
        if (not isinstance(inner, expected) or index.ntotal != count or index.d != dimension
                or index.metric_type != faiss.METRIC_INNER_PRODUCT):
            raise LocalIndexError(
                f"{where} holds a {type(inner).__name__} of {index.ntotal} vectors of dimension {index.d}, expected "
                f"{entry['kind']} over {count} of dimension {dimension}; rebuild the index"
            )
        self._faiss = faiss
        self._index = index
        self._where = where

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def candidates(self, query: np.ndarray, k: int) -> np.ndarray:
        """Ids of up to ``max(4·k, 64)`` approximate neighbours of ``query`` (sorted, no repeats).

        Raises:
            LocalIndexError: the structure holds an id outside ``0..count-1`` (a tampered file).
        """
        wanted = min(max(4 * k, 64), len(self))
        probe = int(self.entry["probe"])
        if self.entry["kind"] == "hnsw":
            params = self._faiss.SearchParametersHNSW(efSearch=max(probe, wanted))
        else:
            params = self._faiss.SearchParametersIVF(nprobe=probe)
        _, ids = self._index.search(np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32), wanted, params=params)
        found = ids[0][ids[0] != -1]  # -1: faiss found fewer than asked
        bad = found[(found < 0) | (found >= len(self))]
        if bad.size:  # ids stored in the file itself: a tampered file whose hashes were recomputed
            raise LocalIndexError(f"{self._where} proposes chunk id {int(bad[0])}, outside the index "
                                  f"(0..{len(self) - 1}); rebuild the index")
        return np.unique(found).astype(np.int64)

    def extended(self, vectors: np.ndarray) -> bytes:
        """The serialisation of a copy of this structure with ``vectors`` appended (``index add``)."""
        index = self._faiss.clone_index(self._index)
        _add(index, vectors)
        return bytes(self._faiss.serialize_index(index))
