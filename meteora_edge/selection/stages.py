"""The numeric core of ECSE: small pure numpy functions, no I/O, no model objects.

These implement the reference behaviour in DESIGN.md exactly; :mod:`meteora_edge.selection.ecse`
composes them into the selector.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..models.vectors import normalize_rows, top_k_indices

__all__ = [
    "SCORINGS",
    "cosine_matrix",
    "pair_rationales",
    "pooled_scores",
    "statistical_elbow",
    "standardise",
    "fuse_scores",
    "zscore_cut",
    "leading_block",
    "term_cover",
    "robust_z",
    "robust_cut",
    "expand_positions",
    "top_k_indices",
]

SCORINGS = ("dense", "lexical", "hybrid")


def cosine_matrix(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``rows`` with every row of ``columns``, in float64.

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
    rationales the scores shrink towards 0 while keeping their order. Computed in float64.
    """
    pooled = normalize_rows(np.asarray(rationale_vectors, dtype=np.float64)).mean(axis=0)
    return normalize_rows(np.asarray(chunk_vectors, dtype=np.float64)) @ pooled


def statistical_elbow(scores: Iterable[float], z_threshold: float = 1.0) -> int | None:
    """Index of the last position to keep in descending ``scores``.

    ``d_i = s_i - s_{i+1}``; the elbow is the first ``i`` whose drop has a z-score above
    ``z_threshold`` (population standard deviation). When the drops do not vary, or none
    stands out, the elbow is the argmax of the second differences ``d_{i+1} - d_i``.
    Computed in float64 whatever the dtype of ``scores``.

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
    second = drops[1:] - drops[:-1]  # n >= 3, so at least one
    return int(np.argmax(second))


def standardise(scores: np.ndarray) -> np.ndarray:
    """Z-scores of each row (population standard deviation, in float64); a constant row becomes zeros.

    Standardising per query puts cosine similarities and BM25 scores, which live on
    unrelated scales, on one scale before they are added.

    Example:
        >>> standardise(np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])).round(3).tolist()
        [[-1.225, 0.0, 1.225], [0.0, 0.0, 0.0]]
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return values
    rows = np.atleast_2d(values)
    # constant means max == min: the std of [0.1, 0.1, 0.1] comes out as 1e-17, not 0
    spread = np.ptp(rows, axis=1, keepdims=True) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(spread, (rows - rows.mean(axis=1, keepdims=True)) / rows.std(axis=1, keepdims=True), 0.0)
    return out if values.ndim == 2 else out[0]


def fuse_scores(dense: np.ndarray, lexical: np.ndarray | None, *, scoring: str, lexical_weight: float = 1.0) -> np.ndarray:
    """One relevance score per (row, chunk) from cosine and BM25 matrices of the same shape, in float64.

    ``dense``: the cosines unchanged (METEORA; ``lexical`` may then be ``None``); ``lexical``:
    the standardised BM25 scores; ``hybrid``: standardised cosine + ``lexical_weight`` ×
    standardised BM25, per row.

    Raises:
        ValueError: an unknown ``scoring`` or mismatched shapes.
    """
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if scoring == "dense":
        return np.asarray(dense, dtype=np.float64)
    if np.shape(lexical) != np.shape(dense):
        raise ValueError(f"dense scores have shape {np.shape(dense)} but lexical scores {np.shape(lexical)}")
    if scoring == "lexical":
        return standardise(lexical)
    return standardise(dense) + lexical_weight * standardise(lexical)


def zscore_cut(scores: np.ndarray, z_threshold: float) -> np.ndarray:
    """Positions whose score lies at least ``z_threshold`` standard deviations above the mean.

    The adaptive cut of the hybrid pooled scores: it keeps the chunks that stand out from
    the candidates as a whole, however many that is (possibly none). Best first.

    Example:
        >>> zscore_cut(np.array([0.1, 0.2, 0.15, 0.9, 0.12]), 1.5).tolist()
        [3]
    """
    z = standardise(scores)
    keep = np.flatnonzero(z >= z_threshold)
    return keep[np.lexsort((keep, -z[keep]))]


def leading_block(scores: np.ndarray, min_gap: float, window: int = 8) -> np.ndarray:
    """The best positions above the widest drop among the top ``window + 1`` scores.

    Scores are standardised first. The block is kept only when that drop is at least
    ``min_gap`` standard deviations wide, so one chunk comes back when one stands out and
    five when five stand together above the rest; a flat profile gives none, and so do
    ``window + 1`` or fewer scores (nothing below the window to stand out from). A block
    stands out from a majority: among fewer than ``2 * window + 1`` scores the window
    shrinks to ``(len(scores) - 1) // 2``, so ten scores give a block of at most four, not
    eight standing over two. Best first.

    Example:
        >>> leading_block(np.array([0.2, 3.3, 0.1, 3.2, 2.8, 0.0, 0.3, 2.3, 0.2, 0.1, 0.4]), 0.5).tolist()
        [1, 3, 4, 7]
        >>> leading_block(np.linspace(1.0, 0.0, 20), 0.5).tolist()  # evenly spread: no block
        []
    """
    z = standardise(scores)
    if len(z) <= window + 1:  # no candidates below the window: a drop cannot be told from noise
        return np.array([], dtype=np.int64)
    window = min(window, (len(z) - 1) // 2)  # at least as many scores below the window as in it
    order = np.lexsort((np.arange(len(z)), -z))
    top = z[order[: window + 1]]
    drops = top[:-1] - top[1:]
    k = int(np.argmax(drops)) + 1
    return order[:k] if drops[k - 1] >= min_gap else np.array([], dtype=np.int64)


def term_cover(
    scores: np.ndarray,
    holders: Sequence[np.ndarray],
    kept: Iterable[int],
    *,
    z_min: float,
    lead: float,
    max_share: float = 0.5,
) -> list[int]:
    """Chunks to add so that every rationale term some good chunk holds is held by a kept chunk.

    Walks the chunks best first while their standardised score is at least ``z_min`` and adds
    each that holds a term no kept chunk holds yet. ``holders[t]`` are the positions of the
    chunks holding term ``t``; a term held by none, or by more than ``max_share`` of the
    chunks (it tells nothing apart), is left out. When the best chunk leads the runner-up by
    ``lead`` standard deviations or more, one chunk answers and nothing is added. So a question
    whose terms are spread over four facts that score alike keeps the four, and one that a
    single chunk answers keeps that one. Returns the added positions, best first.

    Example:
        >>> holders = [np.array([0, 2]), np.array([3]), np.array([1, 2])]   # three terms
        >>> term_cover(np.array([0.9, 0.1, 0.8, 0.7, 0.0]), holders, [0], z_min=0.0, lead=0.5)
        [2, 3]
        >>> term_cover(np.array([2.0, 0.1, 0.8, 0.7, 0.0]), holders, [0], z_min=0.0, lead=0.5)  # 0 stands alone
        []
    """
    values = np.asarray(scores, dtype=np.float64)
    n = values.shape[0]
    z = standardise(values)
    if n > 1 and float(np.diff(np.sort(z)[-2:])[0]) >= lead:
        return []
    useful = [set(int(p) for p in h) for h in holders if 0 < len(h) <= max_share * n]
    kept_set = {int(p) for p in kept}
    todo = [h for h in useful if not h & kept_set]
    added: list[int] = []
    for p in np.lexsort((np.arange(n), -values)):
        if not todo or z[p] < z_min:
            break
        p = int(p)
        if p in kept_set or not any(p in h for h in todo):
            continue
        added.append(p)
        todo = [h for h in todo if p not in h]
    return added


def robust_z(scores: np.ndarray) -> np.ndarray:
    """Robust z-scores: distance from the median in units of the scaled median absolute deviation.

    ``(s - median) / (1.4826 * MAD)`` — the factor makes the unit one standard deviation for
    normally spread scores. Unlike the mean and standard deviation, the median and the MAD
    describe the bulk of the candidates whatever the few best do: five winners that stand
    together do not lift the yardstick they are measured by. When more than half the scores
    are equal (MAD 0) the population standard deviation is the unit; constant scores give zeros.
    Computed in float64.

    Example:
        >>> robust_z(np.array([0.0, 1.0, 2.0, 3.0, 40.0])).round(2).tolist()
        [-1.35, -0.67, 0.0, 0.67, 25.63]
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return values
    median = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - median)))
    if spread <= 0:
        spread = float(values.std())
    if spread <= 0 or not np.isfinite(spread):
        return np.zeros_like(values)
    return (values - median) / spread


def robust_cut(z: np.ndarray, *, z_threshold: float, top_band: float) -> np.ndarray:
    """Positions that stand out from the bulk or stand with the best, best first.

    ``z`` are :func:`robust_z` scores. A chunk is kept when its robust z is at least
    ``z_threshold`` (an outlier of the candidates, however many outliers there are) or lies
    within ``top_band`` robust standard deviations of the best chunk's (it stands with the best,
    even when nothing stands out). So one chunk comes back when one stands alone, and six when
    six stand out together; the best chunk is always kept.

    Example:
        >>> bulk = [0.1, 0.3, 0.2, 0.4, 0.0, 0.25, 0.15, 0.35, 0.05, 0.3]
        >>> robust_cut(robust_z(np.array(bulk + [3.0])), z_threshold=4.0, top_band=0.5).tolist()
        [10]
        >>> robust_cut(robust_z(np.array(bulk + [3.0, 2.9, 3.1])), z_threshold=4.0, top_band=0.5).tolist()
        [12, 10, 11]
    """
    z = np.asarray(z, dtype=np.float64)
    if z.size == 0:
        return np.array([], dtype=np.int64)
    keep = np.flatnonzero((z >= z_threshold) | (z >= z.max() - top_band))
    return keep[np.lexsort((keep, -z[keep]))]


def expand_positions(positions: Iterable[int], n: int, window: int) -> np.ndarray:
    """Every position within ``window`` of a given position, clipped to ``0..n-1``, sorted."""
    chosen = np.full(n, False)
    for p in positions:
        chosen[max(0, int(p) - window) : min(n, int(p) + window + 1)] = True
    return np.flatnonzero(chosen)
