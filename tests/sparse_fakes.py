"""A learned sparse encoder in miniature for tests: each word one term (a stable id from its hash), plus the
words it implies at 0.8, as a SPLADE model adds terms a text does not contain."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from meteora_edge import HashingEncoder
from meteora_edge.models.sparse_index import SparseVector

EXPANDS = {"end": ["terminate"], "terminate": ["end"], "cancel": ["terminate", "end"], "secret": ["confidential"]}


def term_id(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % 30_522


class FakeSparse:
    """``encode_sparse`` like :class:`~meteora_edge.models.sparse_encoder.OnnxSparseEncoder`; counts its calls."""

    def __init__(self, identity: str = "sparse:fake") -> None:
        self.identity = identity
        self.calls = 0

    def encode_sparse(self, texts: list[str]) -> list[SparseVector]:
        self.calls += 1
        out = []
        for text in texts:
            weights: dict[int, float] = {}
            for word in re.findall(r"[a-z]+", text.lower()):
                weights[term_id(word)] = 1.0
                for implied in EXPANDS.get(word, []):
                    weights[term_id(implied)] = max(weights.get(term_id(implied), 0.0), 0.8)
            ids = np.array(sorted(weights), dtype=np.int32)
            out.append(SparseVector(ids, np.array([weights[i] for i in ids], dtype=np.float32)))
        return out


def encoder_with_sparse(identity: str = "sparse:fake") -> HashingEncoder:
    """The hashing encoder carrying a :class:`FakeSparse` (as one loaded from a bundle with a sparse model)."""
    encoder = HashingEncoder()
    encoder.sparse_encoder = FakeSparse(identity)  # type: ignore[attr-defined]
    return encoder
