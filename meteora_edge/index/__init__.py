"""The corpus index: chunking, BM25 and the on-disk and in-memory vector indexes.

``chunking`` cuts documents into word windows that keep character offsets; ``corpus``
reads document files; ``local_index`` is the on-disk index (vectors, chunk records, BM25
from ``models.bm25``), stored as ``generations`` behind an atomic pointer, opened as a
``snapshot`` and described by a strict ``manifest`` schema; ``memory_index`` is the same
search over a list in memory. Imports ``models`` only: it sits beside ``selection``, and
the pipeline uses both.
"""
