"""Learned-sparse postings in a Milvus collection: the field, the property and the reads.

A collection built with ``lexical_scorer="sparse"`` has one more field, ``learned_sparse``
(``SPARSE_FLOAT_VECTOR``: each chunk's vector from the bundle's sparse model, e.g. SPLADE-tiny,
term id → weight), under a ``SPARSE_INVERTED_INDEX`` with metric ``IP``: a query's score for a
chunk is the dot product of their vectors, as in a local index's sparse postings
(:class:`~meteora_edge.models.sparse_index.SparseIndex`). The property ``meteora_edge.lexical``
records ``{"scorer": "sparse", "model": <the sparse model's identity>}``; a query is then scored
by that model (and only by it) through Milvus's sparse search. BM25 (the ``sparse`` field, written
by Milvus's function) stays beside it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import CollectionError
from ..models.sparse_index import SparseVector, sparse_model
from .milvus_collection import LEARNED_SPARSE, PREFIX

__all__ = ["FIELD", "PROPERTY", "as_milvus", "lexical_property", "recorded_model", "sparse_model",
           "encode_rows"]

FIELD = LEARNED_SPARSE
PROPERTY = PREFIX + "lexical"


def as_milvus(vector: SparseVector) -> dict[int, float]:
    """A sparse vector as Milvus takes one: term id → weight."""
    return {int(i): float(w) for i, w in zip(vector.ids, vector.weights)}


def lexical_property(model: Any) -> dict[str, str]:
    """The collection property that records the sparse model (none for BM25 alone)."""
    return {} if model is None else {PROPERTY: json.dumps({"scorer": "sparse", "model": model.identity})}


def recorded_model(properties: dict[str, str], fields: Sequence[str], where: str) -> str | None:
    """The identity of the sparse model whose postings the collection holds, or None (BM25 alone).

    Raises:
        CollectionError: the property is not one this version writes, or the field it promises is absent.
    """
    value = properties.get(PROPERTY)
    if value is None:
        return None
    try:
        record = json.loads(value)
    except ValueError:
        record = None
    if not (isinstance(record, dict) and record.get("scorer") == "sparse" and isinstance(record.get("model"), str)):
        raise CollectionError(f"collection {where} records the lexical scorer {value[:80]!r}, which this version of "
                              "meteora-edge does not know; upgrade meteora-edge or rebuild it")
    if FIELD not in fields:
        raise CollectionError(f"collection {where} records sparse postings but has no {FIELD!r} field; rebuild it")
    return str(record["model"])


def encode_rows(model: Any, texts: Sequence[str], batch_size: int) -> list[dict[int, float]]:
    """Each text's sparse vector as Milvus takes it, encoded ``batch_size`` texts at a time."""
    out: list[dict[int, float]] = []
    for lo in range(0, len(texts), batch_size):
        out += [as_milvus(v) for v in model.encode_sparse(list(texts[lo : lo + batch_size]))]
    return out
