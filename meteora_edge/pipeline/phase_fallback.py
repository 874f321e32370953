"""Phase 4, ``fallback``: BM25 when fewer than ``n_min`` chunks survive verification.

Its hits (over the candidates, or over the whole index) are judged by the same rung, so nothing
enters the context unverified; a chunk the LLM could not judge is judged one rung lower
(:func:`~.judge.rung_below`). Accepted, flagged and rejected chunks never come back.
"""

from __future__ import annotations

import numpy as np

from .judge import judge, rung_below
from .run_state import RunState, Step

__all__ = ["FALLBACK_POOL", "fallback"]

FALLBACK_POOL = 3  # the fallback judges at most this many BM25 hits per chunk it needs


def fallback(run: RunState) -> Step:
    """Add BM25's verified hits until ``n_min`` chunks are accepted; fills ``run.fallback_added``."""
    cfg = run.cfg
    if cfg.n_min is None or len(run.accepted) >= cfg.n_min:
        reason = "off" if cfg.n_min is None else f"{len(run.accepted)} accepted >= n_min {cfg.n_min}"
        return Step(f"not needed ({reason})", {"fired": False, "reason": reason})
    need = cfg.n_min - len(run.accepted)
    reason = f"{len(run.accepted)} accepted < n_min {cfg.n_min}"
    # accepted and flagged chunks never come back; chunks the rung rejected on content stay out too,
    # while a chunk the LLM could not judge (an error, not a flag) is judged again one rung lower
    rejected = {p for p in run.order if run.records[p].verified is False and p not in run.errored}
    blocked = set(run.accepted) | run.flagged | rejected
    excluded_flagged = [run.labels[p] for p in sorted(run.flagged)]
    hits, scope = _bm25_hits(run, blocked, limit=FALLBACK_POOL * need)
    added, refused = [], []
    lower = rung_below(run.pipe.rung, run)
    for start in range(0, len(hits), need):
        batch = hits[start : start + need]
        again = [p for p, _ in batch if p in run.errored]
        fresh = [p for p, _ in batch if p not in run.errored]
        judged = judge(run, fresh, run.pipe.rung) if fresh else []
        retry = [p for p, passed, _, used in judged if not passed and p in run.errored]
        judged = [j for j in judged if j[0] not in retry]
        judged += judge(run, again + retry, lower) if (again or retry) else []
        bm25 = dict(batch)
        for position, passed, score, used in sorted(judged, key=lambda j: -bm25[j[0]]):
            record = run.records[position]
            record.bm25_score, record.verified_by = bm25[position], used
            if passed and len(added) < need:
                record.via_fallback, record.verified, record.relevance = True, True, score
                record.chosen_by = "fallback"
                added.append(position)
            elif not passed:
                record.verified = False
                refused.append(position)
        if len(added) >= need:
            break
    run.fallback_added = added
    summary = f"fired ({reason}); BM25 over the {scope}: {len(added)} added, {len(refused)} refused by verification"
    if not hits:
        summary += " — BM25 found nothing new"
    return Step(summary, {"fired": True, "reason": reason, "scope": scope,
                          "added": [run.labels[p] for p in added], "refused": [run.labels[p] for p in refused],
                          "excluded_flagged": excluded_flagged, "verified_by": sorted(
                              {run.records[p].verified_by for p in added + refused if run.records[p].verified_by})})


def _bm25_hits(run: RunState, blocked: set[int], *, limit: int) -> tuple[list[tuple[int, float]], str]:
    """BM25's best positions for the query outside ``blocked``, adding index hits as candidates."""
    pipe = run.pipe
    if pipe.index is None:
        ids, scores = run.candidate_bm25().search(run.query, limit + len(blocked))
        return [(int(p), float(s)) for p, s in zip(ids, scores) if int(p) not in blocked][:limit], "candidates"
    blocked_ids = {run.ids[p] for p in blocked}
    ids, scores = pipe.index.bm25_search(run.query, limit + len(blocked_ids))
    hits = [(int(c), float(s)) for c, s in zip(ids, scores) if int(c) not in blocked_ids][:limit]
    by_id = {run.ids[p]: p for p in range(len(run.ids))}
    new_ids = [c for c, _ in hits if c not in by_id]
    if new_ids:
        fresh = dict(zip(new_ids, pipe.index.records(new_ids)))
        run.vectors = np.concatenate([run.vectors, np.asarray(pipe.index.vectors_for(new_ids), dtype=np.float32)])
        for c in new_ids:
            by_id[c] = run.add(fresh[c]["text"], fresh[c], c, fresh[c].get("id", c), None)
    return [(by_id[c], s) for c, s in hits], "index"
