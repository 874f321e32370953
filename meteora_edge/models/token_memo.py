"""A small in-memory store of the word-piece vectors an encoder's pooled pass has just computed.

The token cover (:mod:`~meteora_edge.selection.token_cover`) needs the vectors of a text's word
pieces before pooling. For given passages the pooled pass has just computed them for every
candidate and the question; keeping them here saves running the model a second time on the same
texts. It lives in the process only (nothing is written anywhere), holds at most ``max_bytes`` of
vectors and forgets the least recently used text first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

__all__ = ["TokenMemo", "DEFAULT_TOKEN_MEMO_BYTES"]

DEFAULT_TOKEN_MEMO_BYTES = 32 * 2**20  # ~350 texts of 60 pieces × 384 floats


class TokenMemo:
    """Text → its ``(pieces, dimension)`` float32 array, bounded by ``max_bytes`` (least recently used out).

    Thread-safe: an encoder with several sessions fills it from several threads.
    """

    def __init__(self, max_bytes: int = DEFAULT_TOKEN_MEMO_BYTES) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def put(self, text: str, vectors: np.ndarray) -> None:
        """Keep ``vectors`` for ``text``, read-only from now on (an array larger than the whole memo is not kept)."""
        if vectors.nbytes > self.max_bytes:
            return
        vectors.flags.writeable = False  # handed to every reader: none may change it
        with self._lock:
            old = self._items.pop(text, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._items[text] = vectors
            self._bytes += vectors.nbytes
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def get(self, text: str) -> np.ndarray | None:
        """The vectors kept for ``text`` (now the most recently used), or None."""
        with self._lock:
            found = self._items.get(text)
            if found is not None:
                self._items.move_to_end(text)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
