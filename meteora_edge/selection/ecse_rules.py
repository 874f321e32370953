"""ECSE's rules, each a small unit with the same inputs: the :class:`Evidence` and the positions kept so far.

Every rule returns a :class:`RuleStep`: the positions it keeps and its trace entry. ECSE
(:meth:`~meteora_edge.selection.ecse.MeteoraSelector.select`) runs them in this order:

1. :func:`pairing` — each rationale's best chunk (a rationale's excluded chunk skipped);
2. :func:`pooled_cut` — the pooled scores' elbow, z-score cut (with the leading block) or robust cut;
3. :func:`pairing_band` — with the robust cut, the pairs whose pooled score lies too far below the best are dropped;
4. :func:`term_cover` — chunks holding a rationale term no kept chunk holds (off in METEORA);
5. :func:`neighbours` — each kept chunk's neighbours (``expansion_window``).

The numeric work is in :mod:`~meteora_edge.selection.stages`; these functions decide what each
step reads and records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .stages import (
    expand_positions,
    leading_block,
    pair_rationales,
    robust_cut,
    robust_z,
    statistical_elbow,
    term_cover as cover_terms,
    zscore_cut,
)

__all__ = ["Evidence", "RuleStep", "neighbours", "pairing", "pairing_band", "pooled_cut", "term_cover"]


@dataclass(frozen=True)
class Evidence:
    """What every rule reads: each rationale's (row) score for each chunk (column) on the scoring's
    scale, and each chunk's pooled score (the pooled cosine for dense scoring, else the rows' mean)."""

    fused: np.ndarray
    pooled: np.ndarray

    @property
    def n(self) -> int:
        """The number of chunks."""
        return int(self.pooled.shape[0])

    def selection_scores(self) -> np.ndarray:
        """Per chunk: max(pooled score, best score of any rationale)."""
        return np.maximum(self.pooled, self.fused.max(axis=0))


@dataclass(frozen=True)
class RuleStep:
    """One rule's outcome: the positions it keeps (in the rule's order) and its trace entry."""

    kept: list[int]
    trace: dict[str, Any] = field(default_factory=dict)


def pairing(evidence: Evidence, kept: Sequence[int] = (), *, exclude: dict[int, int] | None = None) -> RuleStep:
    """Each rationale's best chunk; ``exclude`` maps a rationale (row) to a chunk its pairing skips.

    The trace entry's ``pairs`` holds each rationale's chunk, in rationale order.
    """
    fused = evidence.fused.copy()
    for row, position in (exclude or {}).items():  # (with one chunk, argmax still lands on it)
        fused[row, position] = -np.inf
    pairs = [int(j) for j in pair_rationales(fused)]
    return RuleStep(sorted(set(pairs)), {"pairs": pairs})


def pooled_cut(
    evidence: Evidence,
    kept: Sequence[int] = (),
    *,
    rule: str,
    elbow_z: float,
    pooled_z: float,
    pooled_gap: float,
    robust_z_min: float,
    top_band: float,
    pairing_band: float | None = None,
) -> RuleStep:
    """The chunks whose pooled score stands out, by ``rule`` (``elbow``, ``zscore`` or ``robust``).

    The trace entry holds ``elbow`` (the last kept rank, or None) and ``cut`` (the robust cut's
    details, else None, recording the ``pairing_band`` :func:`pairing_band` applies after it).
    """
    pooled = evidence.pooled
    cut_details: dict[str, Any] | None = None
    elbow: int | None
    if rule == "elbow":
        order = np.lexsort((np.arange(evidence.n), -pooled))
        elbow = statistical_elbow(pooled[order], elbow_z)
        assert elbow is not None  # there is at least one chunk
        cut = [int(p) for p in order[: elbow + 1]]
    elif rule == "robust":
        z = robust_z(pooled)
        cut = [int(p) for p in robust_cut(z, z_threshold=robust_z_min, top_band=top_band)]
        elbow = len(cut) - 1
        top = float(z.max())
        cut_details = {"rule": "robust", "robust_z": robust_z_min, "top_band": top_band,
                       "pairing_band": pairing_band, "best_z": round(top, 4),
                       "outliers": [p for p in cut if z[p] >= robust_z_min],
                       "with_best": [p for p in cut if z[p] >= top - top_band]}
    else:
        cut = [int(p) for p in zscore_cut(pooled, pooled_z)]
        if pooled_gap > 0:
            cut += [int(p) for p in leading_block(pooled, pooled_gap) if p not in cut]
        elbow = len(cut) - 1 if cut else None
    return RuleStep(cut, {"elbow": elbow, "cut": cut_details})


def pairing_band(evidence: Evidence, kept: Sequence[int], *, band: float) -> RuleStep:
    """Of the pairs ``kept``, those whose robust pooled z-score lies within ``band`` of the best.

    The trace entry's ``pairs_dropped`` maps each dropped pair to its z-score.
    """
    z = robust_z(evidence.pooled)
    top = float(z.max())
    dropped = [p for p in kept if z[p] < top - band]
    return RuleStep([p for p in kept if p not in dropped],
                    {"pairs_dropped": {str(p): round(float(z[p]), 4) for p in dropped}})


def term_cover(
    evidence: Evidence, kept: Sequence[int], *, holders: list[np.ndarray], z_min: float, lead: float
) -> RuleStep:
    """Walking the chunks best first, each that holds a rationale term no kept chunk holds
    (:func:`~meteora_edge.selection.stages.term_cover`); ``holders`` lists each term's chunks."""
    covering = cover_terms(evidence.selection_scores(), holders, list(kept), z_min=z_min, lead=lead)
    return RuleStep(covering, {"cover_z": z_min, "cover_lead": lead, "covering": covering})


def neighbours(evidence: Evidence, kept: Sequence[int], *, window: int) -> RuleStep:
    """The chunks within ``window`` positions of a kept one, not kept already."""
    selected = [int(p) for p in expand_positions(kept, evidence.n, window)]
    return RuleStep(sorted(set(selected) - set(kept)), {"selected": selected})
