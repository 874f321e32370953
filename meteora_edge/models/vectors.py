"""Small vector helpers every stage shares: row normalisation and a tie-stable top-k."""

from __future__ import annotations

import numpy as np

__all__ = ["normalize_rows", "top_k_indices"]


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise each row; a zero row is divided by 1 (stays zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first; ties go to the lower index."""
    scores = np.asarray(scores)
    k = min(k, scores.size)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < scores.size:
        part = np.argpartition(-scores, k - 1)[:k]
        # argpartition does not break ties by index: widen to every score >= the k-th
        cutoff = scores[part].min()
        part = np.flatnonzero(scores >= cutoff)
    else:
        part = np.arange(scores.size)
    order = np.lexsort((part, -scores[part]))
    return part[order][:k]
