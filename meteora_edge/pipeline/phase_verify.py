"""Phase 3, ``verify``: the verification ladder over the selection, then the token cover.

The ladder (LLM → cross-encoder → cosine → none, :mod:`.ladder`) judges each selected
candidate (:func:`~.judge.judge`); a cross-encoder's probability becomes the priority of what it
passes. Then the token cover (:func:`~.rules.token_cover`) accepts a candidate the ladder did not
accept when it matches words of the query that no accepted chunk matches. Over a stored index,
whose chunks' word-piece vectors would cost a model run each, ECSE's term cover runs in its
place (see :data:`~.rules.INDEX_CANDIDATES`).
"""

from __future__ import annotations

from .judge import judge
from .rules import token_cover
from .run_state import RunState, Step

__all__ = ["verify"]


def verify(run: RunState) -> Step:
    """Judge ``run.order`` on the pipeline's rung; fills ``run.accepted``."""
    rung = run.pipe.rung
    for position, passed, score, used in judge(run, run.order, rung):
        record = run.records[position]
        record.verified, record.relevance, record.verified_by = passed, score, used
        if passed:
            run.accepted.append(position)
            if used == "cross-encoder" and score is not None:
                run.priority[position] = (score, "cross-encoder")
    threshold = {"cross-encoder": run.pipe.cross_encoder_tau, "cosine": run.pipe.cosine_tau}.get(rung)
    summary = f"rung {rung}: {len(run.accepted)} of {len(run.order)} accepted"
    cover = token_cover(run)
    if cover.get("added"):
        summary += f"; the token cover added {len(cover['added'])}"
    return Step(summary, {"rung": rung, "tau": threshold, "accepted": [run.labels[p] for p in run.accepted],
                          "flagged": [run.labels[p] for p in sorted(run.flagged)],
                          "errors": [run.labels[p] for p in sorted(run.errored)], "token_cover": cover})
