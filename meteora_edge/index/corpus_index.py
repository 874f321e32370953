"""What the pipeline asks of an index: the :class:`CorpusIndex` protocol.

Three indexes implement it: :class:`~meteora_edge.index.local_index.LocalIndex` (on disk,
the embedded default), :class:`~meteora_edge.index.memory_index.InMemoryIndex` (a list in
memory) and :class:`~meteora_edge.index.milvus_index.MilvusIndex` (a Milvus collection:
Milvus Lite in a local folder, or a server). The pipeline
(:mod:`meteora_edge.pipeline.engine`) uses nothing else, so a new backend only has to
answer these calls.

Chunk ids are non-negative integers; every method that takes ids answers them in the order given.
:func:`open_index` opens an index by the name a user gives: a folder or a ``milvus://`` URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..models.encoders import EncoderLike

__all__ = ["CorpusIndex", "open_index"]


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

    An index may also have an ``analyzer`` (a :class:`~meteora_edge.models.analyzer.Analyzer`):
    the one its BM25 terms came from. The pipeline then scores the candidates' lexical
    similarity to rationales (ECSE's hybrid score) and its fallback with the same analyser;
    without one it uses the default (``english``).
    """

    @property
    def encoder_id(self) -> str: ...

    def __len__(self) -> int: ...

    def search(self, query_vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def bm25_search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def lexical_scores(self, text: str, ids: Sequence[int]) -> np.ndarray: ...

    def vectors_for(self, ids: Sequence[int]) -> np.ndarray: ...

    def records(self, ids: Sequence[int]) -> list[dict[str, Any]]: ...


def open_index(spec: str, *, encoder: EncoderLike | None = None) -> CorpusIndex:
    """The index ``spec`` names — a local index folder, or a Milvus collection as a ``milvus://``
    URL (see :mod:`meteora_edge.index.milvus_location`) — checked, and checked against ``encoder``.

    Raises:
        LocalIndexError / CollectionError: missing, damaged, unreachable or another encoder's.
        InputError: a malformed ``milvus://`` URL.
        MissingExtraError: a Milvus URL without the ``milvus`` extra.
    """
    from .milvus_location import is_milvus_url, parse_milvus_url

    if is_milvus_url(spec):
        from .milvus_index import MilvusIndex

        return MilvusIndex.open(parse_milvus_url(spec), encoder=encoder)
    from .local_index import LocalIndex

    return LocalIndex.load(spec, encoder=encoder)
