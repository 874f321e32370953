"""BM25 postings built in bounded blocks on disk, so a build's memory does not grow with its postings.

:meth:`BM25Index.extend <meteora_edge.models.bm25.BM25Index.extend>` holds every posting in
memory and sorts them at once (about 90 bytes a posting at the peak: 3 GB at a million
chunks). A :class:`PostingSpool` writes the same files a block at a time:

1. :meth:`~PostingSpool.add` collects each document's postings (term id, document, term
   frequency) and, every ``block_postings`` postings, sorts the block by term (stable, so by
   document within a term) and appends it to an unnamed temporary file;
2. :meth:`~PostingSpool.write` walks the terms in ranges of about ``pass_postings`` postings,
   reads each block's postings of those terms, orders them by term (blocks hold increasing
   documents, so a stable sort gives document order within a term) and streams them into
   ``bm25_doc_ids.npy`` and ``bm25_tf.npy``.

Term ids are given in order of first appearance, as :class:`BM25Index` gives them, so the
files are byte for byte the ones :meth:`BM25Index.save` writes for the same documents
(the tests check it).
"""

from __future__ import annotations

import json
import os
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, LocalIndexError
from ..models.analyzer import Analyzer
from ..models.bm25 import BM25_ARRAYS, BM25_VOCAB, BM25Index
from .vector_spool import Spool, spool_file

__all__ = ["PostingSpool", "BLOCK_POSTINGS", "PASS_POSTINGS"]

#: Postings sorted and written per block (about 60 MB of buffers and sort temporaries).
BLOCK_POSTINGS = 1 << 21
#: Postings merged per pass when the files are written (about 50 MB).
PASS_POSTINGS = 1 << 21
_I4 = np.dtype("<i4")


class _Block:
    """Where one sorted block sits in the spool file, and where each of its terms starts."""

    def __init__(self, offset: int, size: int, terms: np.ndarray, starts: np.ndarray) -> None:
        self.offset, self.size = offset, size
        self.terms, self.starts = terms, starts  # the block's distinct terms (ascending) and their first posting

    def position(self, term: int) -> int:
        """Index of the block's first posting of a term >= ``term``."""
        at = int(np.searchsorted(self.terms, term))
        return int(self.starts[at]) if at < self.terms.size else self.size


class PostingSpool(Spool):
    """Collects documents' BM25 postings in sorted blocks on disk; writes the index's BM25 files.

    Args:
        analyzer: turns texts into terms (:meth:`add_text`) and is the index's analyser.
        folder: where the temporary file goes (falls back to the system's temporary folder).
        where: the index being built, for error messages.
        block_postings, pass_postings: the memory bounds (see the module's docstring; by default
            :data:`BLOCK_POSTINGS` and :data:`PASS_POSTINGS`).

    Raises:
        ConfigError: a block or pass size below 1.
        LocalIndexError: the temporary file cannot be written (a full disk): the index is unchanged.
    """

    def __init__(self, analyzer: Analyzer, folder: Path | None = None, *, where: object = "",
                 block_postings: int | None = None, pass_postings: int | None = None) -> None:
        block_postings = BLOCK_POSTINGS if block_postings is None else block_postings
        pass_postings = PASS_POSTINGS if pass_postings is None else pass_postings
        if block_postings < 1 or pass_postings < 1:
            raise ConfigError(f"block_postings and pass_postings must be >= 1, got {block_postings} and "
                              f"{pass_postings}")
        self.analyzer = analyzer
        self.where = where
        self.vocab: dict[str, int] = {}
        self._params = BM25Index.empty(analyzer=analyzer)  # the default k1, b, epsilon
        self._block_postings, self._pass_postings = block_postings, pass_postings
        self._lengths = array("i")
        self._terms, self._docs, self._freqs = array("i"), array("i"), array("i")
        self._df = np.zeros(0, dtype=np.int64)
        self._blocks: list[_Block] = []
        self._spilled = 0
        self._file = spool_file(folder, "postings")

    @property
    def n_docs(self) -> int:
        return len(self._lengths)

    def add_text(self, text: str) -> None:
        """Add the next document as a text, analysed by :attr:`analyzer`."""
        self.add(self.analyzer.tokens(text))

    def add(self, tokens: Sequence[str]) -> None:
        """Add the next document as its tokens."""
        doc = len(self._lengths)
        self._lengths.append(len(tokens))
        vocab = self.vocab
        for term, count in Counter(tokens).items():
            self._terms.append(vocab.setdefault(term, len(vocab)))
            self._docs.append(doc)
            self._freqs.append(count)
        if len(self._terms) >= self._block_postings:
            self._spill()

    def _spill(self) -> None:
        """Sort the collected postings by term and append them to the file as one block."""
        if not self._terms:
            return
        terms = np.frombuffer(self._terms, dtype=np.int32)
        order = np.argsort(terms, kind="stable")  # documents ascend within a term
        terms = terms[order]
        docs, freqs = np.frombuffer(self._docs, dtype=np.int32), np.frombuffer(self._freqs, dtype=np.int32)
        parts = (terms, docs[order], freqs[order])
        df = np.bincount(terms, minlength=len(self.vocab))
        df[: self._df.size] += self._df
        self._df = df
        firsts = np.flatnonzero(np.diff(terms, prepend=-1))
        block = _Block(self._spilled, int(terms.size), terms[firsts], firsts.astype(np.int64))
        try:
            for part in parts:
                os.pwrite(self._file.fileno(), part.astype(_I4, copy=False).tobytes(), self._spilled)
                self._spilled += part.nbytes
        except OSError as exc:
            raise LocalIndexError(f"cannot write the index at {self.where}: {exc.strerror or exc} (while spooling "
                                  "its BM25 postings to a temporary file); the index there is unchanged") from None
        self._blocks.append(block)
        self._terms, self._docs, self._freqs = array("i"), array("i"), array("i")

    def _read(self, block: _Block, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Postings ``lo`` to ``hi`` of a block: (terms, documents, frequencies)."""
        fd = self._file.fileno()
        return tuple(  # type: ignore[return-value]
            np.frombuffer(os.pread(fd, (hi - lo) * 4, block.offset + (k * block.size + lo) * 4), dtype=_I4)
            for k in range(3))

    def write(self, writer: Any, prefix: str = "") -> None:
        """Write the BM25 files (``prefix`` + the names of :data:`BM25_ARRAYS` and :data:`BM25_VOCAB`)
        through ``writer`` (a :class:`~meteora_edge.index.generations.GenerationWriter`)."""
        self._spill()
        df = np.zeros(len(self.vocab), dtype=np.int64)
        df[: self._df.size] = self._df
        term_ptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
        total = int(term_ptr[-1])
        (ptr_name, _), (docs_name, _), (tf_name, _), (len_name, _) = BM25_ARRAYS
        writer.write_array(prefix + ptr_name, term_ptr)
        header = {"descr": _I4.str, "fortran_order": False, "shape": (total,)}
        # the inner file is finished (fsynced, listed) first: doc ids before frequencies, as ever
        with writer.stream(prefix + tf_name) as tf_out, writer.stream(prefix + docs_name) as docs_out:
            np.lib.format.write_array_header_1_0(docs_out, header)
            np.lib.format.write_array_header_1_0(tf_out, header)
            lo_term = 0
            while lo_term < len(self.vocab):
                reach = int(np.searchsorted(term_ptr, term_ptr[lo_term] + self._pass_postings, side="right")) - 1
                hi_term = min(max(reach, lo_term + 1), len(self.vocab))
                parts = [self._read(b, b.position(lo_term), b.position(hi_term)) for b in self._blocks]
                terms = np.concatenate([p[0] for p in parts])
                order = np.argsort(terms, kind="stable")  # blocks come in document order
                docs_out.write(np.concatenate([p[1] for p in parts])[order].tobytes())
                tf_out.write(np.concatenate([p[2] for p in parts])[order].tobytes())
                lo_term = hi_term
        writer.write_array(prefix + len_name, np.frombuffer(self._lengths, dtype=np.int32).astype(_I4))
        document = {"params": {"k1": self._params.k1, "b": self._params.b, "epsilon": self._params.epsilon},
                    "terms": list(self.vocab)}
        writer.write_bytes(prefix + BM25_VOCAB, json.dumps(document, ensure_ascii=False).encode("utf-8"))
