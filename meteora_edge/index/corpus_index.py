"""What the pipeline asks of an index: the :class:`CorpusIndex` protocol.

Three indexes implement it: :class:`~meteora_edge.index.local_index.LocalIndex` (on disk,
the embedded default), :class:`~meteora_edge.index.memory_index.InMemoryIndex` (a list in
memory) and :class:`~meteora_edge.index.milvus_index.MilvusIndex` (a Milvus collection:
Milvus Lite in a local folder, or a server). The pipeline
(:mod:`meteora_edge.pipeline.engine`) uses nothing else, so a new backend only has to
answer these calls.

Chunk ids are non-negative integers; every method that takes ids answers them in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["CorpusIndex"]


@runtime_checkable
class CorpusIndex(Protocol):
    """The calls the pipeline makes on an index.

    * ``encoder_id`` — the identity of the encoder that embedded the chunks (the pipeline
      refuses an encoder with another identity);
    * ``search(query_vector, k)`` — cosine kNN: ``(ids, scores)``, best first;
    * ``bm25_search(text, k)`` — full-text search over the whole index: ``(ids, scores)``
      of the ``k`` best chunks with a positive score, best first;
    * ``lexical_scores(text, ids)`` — the same BM25 score of ``text`` for each of ``ids``
      (0 for a chunk that shares no term with it), float64;
    * ``vectors_for(ids)`` — the chunks' L2-normalised vectors, float32 ``(len(ids), dim)``;
    * ``records(ids)`` — the stored chunk records (at least ``id`` and ``text``).
    """

    @property
    def encoder_id(self) -> str: ...

    def __len__(self) -> int: ...

    def search(self, query_vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray: ...

    def vectors_for(self, ids: Sequence[int]) -> np.ndarray: ...

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]: ...
