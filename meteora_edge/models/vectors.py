"""Small vector helpers every stage shares: row normalisation and a tie-stable top-k."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["normalize_rows", "top_k_indices", "best_positive"]


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


def best_positive(scores: np.ndarray, k: int, within: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best positions with a positive score, best first (ties to the lower index), and
    their scores; ``within`` restricts them to those positions.

    Example:
        >>> best_positive(np.array([0.5, 0.0, 2.0, 1.0]), 2, within=[0, 1, 3])
        (array([3, 0]), array([1. , 0.5]))
    """
    if within is not None:
        mask = np.full(scores.shape, -np.inf)
        ids = np.asarray(within, dtype=np.int64)
        mask[ids] = scores[ids]
        scores = mask
    best = top_k_indices(scores, k)
    best = best[scores[best] > 0]
    return best, scores[best]
