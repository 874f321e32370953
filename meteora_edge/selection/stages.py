"""The numeric core of ECSE: small pure numpy functions, no I/O, no model objects.

These implement the reference behaviour in DESIGN.md exactly; :mod:`meteora_edge.selection.ecse`
composes them into the selector.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..models.encoders import normalize_rows

__all__ = [
    "cosine_matrix",
    "pair_rationales",
    "pooled_scores",
    "statistical_elbow",
    "expand_positions",
    "top_k_indices",
]


def cosine_matrix(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``rows`` with every row of ``columns``.

    Rows are L2-normalised first; a zero row keeps norm 1 and so scores 0 everywhere.
    """
    return normalize_rows(np.asarray(rows, dtype=np.float64)) @ normalize_rows(
        np.asarray(columns, dtype=np.float64)
    ).T


def pair_rationales(similarity: np.ndarray) -> np.ndarray:
    """Each rationale (row) takes its most similar chunk (column); ties go to the first."""
    return np.argmax(similarity, axis=1)


def pooled_scores(rationale_vectors: np.ndarray, chunk_vectors: np.ndarray) -> np.ndarray:
    """Score chunks against the mean of the L2-normalised rationale rows.

    The mean is *not* re-normalised (reference behaviour), so with several diverse
    rationales the scores shrink towards 0 while keeping their order.
    """
    pooled = normalize_rows(np.asarray(rationale_vectors, dtype=np.float64)).mean(axis=0)
    return normalize_rows(np.asarray(chunk_vectors, dtype=np.float64)) @ pooled


def statistical_elbow(scores: Iterable[float], z_threshold: float = 1.0) -> int | None:
    """Index of the last position to keep in descending ``scores``.

    ``d_i = s_i - s_{i+1}``; the elbow is the first ``i`` whose drop has a z-score above
    ``z_threshold`` (population standard deviation). When the drops do not vary, or none
    stands out, the elbow is the argmax of the second differences ``d_{i+1} - d_i``.

    Args:
        scores: scores sorted in descending order.
        z_threshold: how many standard deviations a drop must exceed the mean drop.

    Returns:
        ``None`` for no scores; ``n - 1`` (keep all) for one or two scores; otherwise the
        elbow position ``i`` (keep positions ``0..i``).

    Example:
        >>> statistical_elbow([0.9, 0.88, 0.86, 0.3, 0.28, 0.27])
        2
    """
    values = np.asarray(list(scores), dtype=np.float64)
    n = values.size
    if n == 0:
        return None
    if n <= 2:
        return n - 1
    drops = values[:-1] - values[1:]
    std = drops.std()
    if std > 0:
        above = np.flatnonzero((drops - drops.mean()) / std > z_threshold)
        if above.size:
            return int(above[0])
    second = drops[1:] - drops[:-1]
    return int(np.argmax(second)) if second.size else 0


def expand_positions(positions: Iterable[int], n: int, window: int) -> np.ndarray:
    """Every position within ``window`` of a given position, clipped to ``0..n-1``, sorted."""
    chosen = np.zeros(n, dtype=bool)
    for p in positions:
        chosen[max(0, int(p) - window) : min(n, int(p) + window + 1)] = True
    return np.flatnonzero(chosen)


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
