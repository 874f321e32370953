"""Phase 6, ``budget``: greedy packing into ``t_max`` tokens of the answer model's tokenizer.

The chunks are packed in priority order (:func:`~.budget.pack`); without ``t_max`` every chunk
is kept and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .budget import CUT_TO_FIT, PackDecision, TokenCounter, pack
from .run_state import RunState, Step

__all__ = ["budget"]


def budget(run: RunState) -> Step:
    """Pack ``run.final``; sets ``run.chosen`` to ``(position, tokens, text)`` per kept chunk, in order."""
    cfg, counter = run.cfg, run.pipe.token_counter
    if cfg.t_max is None:
        counts = counter.count([run.texts[p] for p in run.final])
        chosen = [(p, n, run.texts[p]) for p, n in zip(run.final, counts)]
        for p, n, _ in chosen:
            run.records[p].tokens, run.records[p].budget = n, "kept"
        summary, details = f"no budget; {sum(counts)} tokens", {"t_max": None}
    else:
        decisions = pack(run.texts, run.final, cfg.t_max, counter, oversize=cfg.oversize)  # type: ignore[arg-type]
        chosen = [(d.position, d.tokens, d.text) for d in decisions if d.kept]
        for d in decisions:
            run.records[d.position].tokens, run.records[d.position].budget = d.tokens, d.outcome
        cut = next((d for d in decisions if not d.kept), None)
        used = sum(n for _, n, _ in chosen)
        summary = f"{len(chosen)} chunks, {used}/{cfg.t_max} tokens"
        note = _cut_to_fit_note(decisions, run.labels, run.texts, counter, cfg.t_max)
        if note is not None:
            summary += f"; {note}"
        if cut is not None:
            summary += f"; first cut at chunk {run.labels[cut.position]} ({cut.outcome})"
        details: dict[str, Any] = {
            "t_max": cfg.t_max, "used": used, "oversize": cfg.oversize,
            "cut": None if cut is None else {"chunk": run.labels[cut.position], "outcome": cut.outcome}}
        if note is not None:
            details["note"] = note
    for p, _, _ in chosen:
        run.records[p].kept = True
    run.chosen = chosen
    return Step(summary, {"tokenizer": counter.identity, **details})


def _cut_to_fit_note(decisions: Sequence[PackDecision], labels: Sequence[Any], texts: Sequence[str],
                     counter: TokenCounter, t_max: int) -> str | None:
    """The trace's note when the budget cut its first chunk because no chunk fitted whole (else None)."""
    first = next((d for d in decisions if d.outcome == CUT_TO_FIT), None)
    if first is None:
        return None
    whole = counter.count([texts[first.position]])[0]
    return (f"every chunk is larger than t_max {t_max}: chunk {labels[first.position]} ({whole} tokens) was cut to "
            f"{first.tokens} tokens so the context is not empty; raise t_max or index with a smaller chunk_size")
