"""Phase 5, ``prioritise``: order the accepted chunks by priority, then drop near-duplicates.

The verified chunks sort by their priority score (the cross-encoder's probability when that
rung judged them, else the LLM rerank's combined score, the selection (ECSE) score or the
retrieval score); fallback hits follow in BM25 order. A chunk whose cosine to a kept one exceeds
``theta_redundancy`` is dropped (:func:`~.prioritise.drop_duplicates`), unless it brings question
words the kept ones do not match (``spare_new_words``, the token cover's test).
"""

from __future__ import annotations

from .prioritise import drop_duplicates
from .run_state import RunState, Step

__all__ = ["prioritise"]


def prioritise(run: RunState) -> Step:
    """Set ``run.final``: the accepted and fallback chunks in priority order, near-duplicates dropped."""
    ordered = sorted(run.accepted, key=lambda p: (-run.priority[p][0], p))
    ordered += sorted(run.fallback_added, key=lambda p: (-(run.records[p].bm25_score or 0.0), p))
    for p in run.fallback_added:
        run.priority[p] = (float(run.records[p].bm25_score or 0.0), "bm25")
    for rank, p in enumerate(ordered):
        run.records[p].priority = run.priority[p][0]
        run.records[p].priority_rank = rank
    names = sorted({run.priority[p][1] for p in run.accepted})
    theta = run.cfg.theta_redundancy
    if theta is None:
        run.final = ordered
        return Step(f"{len(ordered)} ordered by {'/'.join(names) or '-'}; dedup off", {"theta": None, "priority": names})
    spared: dict[int, float] = {}
    matcher = run.cover.matcher if run.cover is not None and run.cfg.spare_new_words else None

    def brings_words(position: int, kept: list[int]) -> bool:  # the token cover's test, against the kept
        gain = matcher.gain(position, kept)  # type: ignore[union-attr]
        if gain >= run.cfg.token_cover:  # type: ignore[operator]
            spared[position] = round(gain, 6)
        return position in spared

    kept, absorbed = drop_duplicates(run.vectors, ordered, theta, spare=brings_words if matcher else None)
    for position, (by, cosine) in absorbed.items():
        run.records[position].duplicate_of = run.labels[by]
        run.records[position].duplicate_cosine = cosine
    run.final = kept
    summary = (f"{len(kept)} kept by {'/'.join(names) or '-'} score, {len(absorbed)} near-duplicates dropped "
               f"(cosine > {theta})")
    if spared:
        summary += f", {len(spared)} kept for question words the others do not match"
    return Step(summary, {"theta": theta, "priority": names,
                          "dropped": {str(run.labels[p]): run.labels[b] for p, (b, _) in absorbed.items()},
                          **({"spared": {str(run.labels[p]): g for p, g in spared.items()}} if matcher else {})})
