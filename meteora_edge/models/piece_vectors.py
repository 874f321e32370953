"""Word-piece vectors before pooling, for the token-level match ("terminate" near "end").

:class:`PieceVectors` gives :class:`~meteora_edge.models.onnx_encoder.OnnxEncoder` its
:meth:`~PieceVectors.pieces` and :meth:`~PieceVectors.token_vectors`, and keeps the pieces of the
texts the model ran on in the encoder's in-memory :class:`~meteora_edge.models.token_memo.TokenMemo`.
The encoder supplies the model: ``_load`` (open it once), ``_hidden`` (one batch's token vectors)
and ``_checked`` (every text a string).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .encoders import normalize_rows
from .onnx_session import tokenize_batch
from .token_memo import TokenMemo

__all__ = ["PieceVectors"]


class PieceVectors:
    """The word-piece side of an ONNX encoder (mixed into ``OnnxEncoder``)."""

    token_memo: TokenMemo
    isolate_texts: bool
    batch_size: int
    _tokenizer: Any

    @staticmethod
    def _piece_rows(hidden: np.ndarray, encoding: Any) -> np.ndarray:
        """One text's unit-length word-piece vectors from its row of ``hidden`` (special tokens dropped)."""
        keep = [k for k, special in enumerate(encoding.special_tokens_mask) if not special]
        return normalize_rows(hidden[keep]).astype(np.float32)

    def _remember(self, texts: list[str], batch: list[Any], hidden: np.ndarray) -> None:
        if self.token_memo.max_bytes:
            for row, (text, encoding) in enumerate(zip(texts, batch)):
                self.token_memo.put(text, self._piece_rows(hidden[row], encoding))

    def pieces(self, texts: list[str]) -> list[list[str]]:
        """Each text's word pieces as the model reads them (truncated as it is; no special tokens).

        Tokenising only: no model run. Raises as :meth:`token_vectors`.
        """
        self._load()
        return [[t for t, special in zip(e.tokens, e.special_tokens_mask) if not special]
                for e in tokenize_batch(self._tokenizer, self._checked(texts))] if texts else []

    def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Per text: its word pieces' vectors before pooling, unit length, one row per piece of :meth:`pieces`.

        What a token-level match needs ("terminate" near "end"). A text the model ran on lately
        (:meth:`encode` included) is read from the in-memory :attr:`token_memo`; the model runs
        on the others (the embedding cache holds pooled vectors only): each text alone when the
        variant's activations are quantised per batch (``isolate_texts``), else in length-sorted
        batches, so a text's vectors do not depend on the texts beside it more than its pooled
        vector does.

        Raises:
            ConfigError: an item is not a string.
            ModelError: onnxruntime fails while running.
        """
        texts = self._checked(texts)
        out: list[np.ndarray | None] = [self.token_memo.get(t) for t in texts]
        todo = list(dict.fromkeys(t for t, found in zip(texts, out) if found is None))
        if todo:
            self._load()
            encodings = tokenize_batch(self._tokenizer, todo)
            order = sorted(range(len(todo)), key=lambda i: len(encodings[i].ids))
            size = 1 if self.isolate_texts else self.batch_size
            fresh: dict[str, np.ndarray] = {}
            for start in range(0, len(order), size):
                rows = order[start : start + size]
                batch = [encodings[i] for i in rows]
                hidden, _ = self._hidden(batch)
                for row, i in enumerate(rows):  # each text's rows once: returned, and kept when there is room
                    fresh[todo[i]] = vectors = self._piece_rows(hidden[row], encodings[i])
                    if self.token_memo.max_bytes:
                        self.token_memo.put(todo[i], vectors)
            out = [found if found is not None else fresh[t] for t, found in zip(texts, out)]
        return out  # type: ignore[return-value]
