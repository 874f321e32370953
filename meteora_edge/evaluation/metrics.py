"""The metrics of an evaluation: selection P/R/F1 against gold ids, recall@k and nDCG@k of a ranking.

Pure functions of ids and numbers; no I/O, no models.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["SelectionMetrics", "precision_recall_f1", "recall_at_k", "ndcg_at_k"]


@dataclass(frozen=True)
class SelectionMetrics:
    """Precision, recall and F1 of one selection against gold ids (METEORA's metrics)."""

    precision: float
    recall: float
    f1: float
    correct_chunk_found: bool

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "correct_chunk_found": self.correct_chunk_found}


def precision_recall_f1(selected: Iterable[Hashable], gold: Iterable[Hashable]) -> SelectionMetrics:
    """Score the selected chunk ids against the gold ones (duplicates count once).

    Precision is 0 when nothing is selected, recall 0 when there is no gold.

    Example:
        >>> m = precision_recall_f1([1, 2, 3, 4], [2, 9])
        >>> (m.precision, m.recall, round(m.f1, 4), m.correct_chunk_found)
        (0.25, 0.5, 0.3333, True)
    """
    chosen, wanted = set(selected), set(gold)
    hits = len(chosen & wanted)
    precision = hits / len(chosen) if chosen else 0.0
    recall = hits / len(wanted) if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return SelectionMetrics(precision, recall, f1, hits > 0)



def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")


def recall_at_k(ranking: Sequence[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """The share of the gold ids among the first ``k`` of ``ranking`` (0 when there is no gold).

    Example:
        >>> recall_at_k(["d3", "d1", "d7"], ["d1", "d9"], 2)
        0.5
    """
    _check_k(k)
    wanted = set(gold)
    return len(wanted & set(ranking[:k])) / len(wanted) if wanted else 0.0


def ndcg_at_k(ranking: Sequence[Hashable], relevance: Mapping[Hashable, float], k: int) -> float:
    """Normalised discounted cumulative gain of the first ``k`` of ``ranking`` (trec_eval's linear gain).

    ``relevance`` maps ids to graded relevance; ids it lacks, and grades of 0 or less, gain
    nothing. An id repeated in ``ranking`` gains only at its first place. 0 when nothing is relevant.

    Example:
        >>> round(ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10), 4)
        0.8597
    """
    _check_k(k)
    gains: list[float] = []
    seen: set[Hashable] = set()
    for doc in ranking[:k]:
        gains.append(0.0 if doc in seen else max(float(relevance.get(doc, 0.0)), 0.0))
        seen.add(doc)
    ideal = sorted((g for g in (float(v) for v in relevance.values()) if g > 0), reverse=True)[:k]
    best = _dcg(ideal)
    return _dcg(gains) / best if best else 0.0


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))

