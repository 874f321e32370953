"""The LLM rerank: a local model's relevance joins ECSE's scores over ECSE's best candidates.

ECSE's score (the max of pooled and pairing score, on the scoring's scale) ranks every
candidate. The *pool* is ECSE's selection followed by the next-best candidates by that
score, ``pool`` in all (never fewer than ECSE selected). A relevance scorer (e.g.
:class:`~meteora_edge.selection.llm_scorer.LlamaRelevanceScorer`) scores each pooled
chunk; both scores are standardised over the pool and added with the LLM's at ``weight``::

    combined_j = z(ecse)_j + weight · z(llm)_j

and the chunks whose combined score lies ``z`` standard deviations or more above the
pool's mean are kept (at least the best one), best first. The defaults (a pool of 8, the
LLM at weight 1.5, half a standard deviation) were chosen on 20 dev questions and checked
on the other 30 (the other weights and cuts measured: docs/what-did-not-pay.md). This module
is the pure arithmetic; the pipeline calls the scorer.

Example:
    >>> rerank_pool([0.9, 0.7, 0.2, 0.1], selected=[0], pool=3)
    [0, 1, 2]
    >>> rerank_cut(np.array([2.0, 1.0, 0.0]), np.array([-1.0, 3.0, -2.0]), weight=1.0, z=0.4)
    [1, 0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..selection.stages import standardise

__all__ = ["rerank_pool", "rerank_cut", "combined_scores"]


def rerank_pool(scores: Sequence[float], *, selected: Sequence[int], pool: int) -> list[int]:
    """ECSE's selection (best first), then the best other candidates by ``scores``, ``pool`` in all.

    Ties keep the lower position first.
    """
    values = np.asarray(scores, dtype=np.float64)
    order = [int(j) for j in np.lexsort((np.arange(len(values)), -values))]
    wanted = {int(j) for j in selected}
    chosen = [j for j in order if j in wanted]
    rest = [j for j in order if j not in wanted]
    return chosen + rest[: max(0, pool - len(chosen))]


def combined_scores(ecse: np.ndarray, llm: np.ndarray, *, weight: float) -> np.ndarray:
    """``z(ecse) + weight · z(llm)`` over the pool (a constant row standardises to zeros)."""
    return standardise(np.asarray(ecse, dtype=np.float64)) + weight * standardise(np.asarray(llm, dtype=np.float64))


def rerank_cut(ecse: np.ndarray, llm: np.ndarray, *, weight: float, z: float) -> list[int]:
    """Pool rows whose standardised combined score is at least ``z``, best first; never empty for a non-empty pool."""
    if len(ecse) == 0:
        return []
    combined = combined_scores(ecse, llm, weight=weight)
    standing = standardise(combined)
    order = [int(j) for j in np.lexsort((np.arange(len(combined)), -combined))]
    kept = [j for j in order if standing[j] >= z]
    return kept or order[:1]
