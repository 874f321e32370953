"""What ECSE returns: the :class:`SelectionResult` of a selection and the :class:`AutoPlan` of rule-written rationales."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .auto_rationales import SECOND_HOP
from .rationales import Rationale

__all__ = ["AutoPlan", "SelectionResult"]


@dataclass(frozen=True)
class SelectionResult:
    """What ECSE selected and why.

    ``selected_indices`` are sorted chunk positions; ``selected_chunks`` are the caller's
    own objects at those positions. ``details`` records every stage (see :meth:`to_dict`).
    """

    selected_indices: list[int]
    selected_chunks: list[Any]
    rationales: list[Rationale]
    pairing_indices: list[int]
    pooled_indices: list[int]
    expansion_indices: list[int]
    elbow_index: int | None
    rationale_matches: list[dict[str, Any]]
    pooled_scores: list[float]
    pairing_scores: list[float]
    encoder: str = ""
    stages: dict[str, bool] = field(default_factory=dict)
    scoring: str = "dense"
    dense_scores: list[float] = field(default_factory=list)
    lexical_scores: list[float] | None = None
    pooled_cut: str = "elbow"
    strategy: dict[str, Any] | None = None
    rationale_vectors: np.ndarray | None = field(default=None, repr=False, compare=False)
    cut: dict[str, Any] | None = None

    @property
    def rationale_contributions(self) -> dict[int, list[int]]:
        """For each paired chunk, the rationales (1-based indices) that chose it."""
        contributions: dict[int, list[int]] = {}
        for match in self.rationale_matches:
            contributions.setdefault(match["chunk_index"], []).append(match["rationale_index"])
        return contributions

    def chosen_by(self) -> dict[int, str]:
        """For each selected position, the stage that chose it: the first of ``pooled cut``,
        ``second-hop pair`` (the best chunk of the rule-written second hop), ``pair`` (the best
        chunk of another rationale), ``term cover`` and ``neighbour`` (expansion) that holds it.

        Example:
            >>> from meteora_edge import HashingEncoder, MeteoraSelector
            >>> chunks = ["Fees are due monthly.", "Either party may terminate.", "Notices go by email."]
            >>> selector = MeteoraSelector(HashingEncoder(), use_pooling=False)
            >>> res = selector.select(chunks, ["termination rights of either party"])
            >>> res.chosen_by()  # the rationale's best chunk, and its neighbours (expansion_window 1)
            {0: 'neighbour', 1: 'pair', 2: 'neighbour'}
        """
        hop = {r.index for r in self.rationales if r.label == SECOND_HOP}
        hop_pairs = {m["chunk_index"] for m in self.rationale_matches if m["rationale_index"] in hop}
        pooled, pairs = set(self.pooled_indices), set(self.pairing_indices)
        covering = set((self.cut or {}).get("covering", []))
        chosen: dict[int, str] = {}
        for p in self.selected_indices:
            if p in pooled:
                chosen[p] = "pooled cut"
            elif p in pairs:
                chosen[p] = "second-hop pair" if p in hop_pairs else "pair"
            else:
                chosen[p] = "term cover" if p in covering else "neighbour"
        return chosen

    def scores(self) -> np.ndarray:
        """Per chunk: max(pooled score, best pairing score of any rationale), on the scoring's scale."""
        return np.maximum(np.asarray(self.pooled_scores), np.asarray(self.pairing_scores))

    def to_dict(self) -> dict[str, Any]:
        return {
            "selected_indices": list(self.selected_indices),
            "rationales": [r.to_dict() for r in self.rationales],
            "encoder": self.encoder,
            "details": {
                "pairing_indices": list(self.pairing_indices),
                "pooled_indices": list(self.pooled_indices),
                "expansion_indices": list(self.expansion_indices),
                "elbow_index": self.elbow_index,
                "rationale_matches": [dict(m) for m in self.rationale_matches],
                "pooled_scores": [round(s, 6) for s in self.pooled_scores],
                "rationale_contributions": {
                    str(k): v for k, v in sorted(self.rationale_contributions.items())
                },
                "stages": dict(self.stages),
                "scoring": self.scoring,
                "pooled_cut": self.pooled_cut,
                "dense_scores": [round(s, 6) for s in self.dense_scores],
                "lexical_scores": None if self.lexical_scores is None else [round(s, 6) for s in self.lexical_scores],
                "rationale_strategy": self.strategy,
                "cut": None if self.cut is None else dict(self.cut),
            },
        }


@dataclass(frozen=True)
class AutoPlan:
    """Rationales written by rule for one query (see :meth:`MeteoraSelector.plan_auto`).

    ``exclude_rows`` are the rationales (0-based rows) whose pairing skips the chunk with
    ``first_hop_text``: the second hop must land elsewhere.
    """

    rationales: list[Rationale]
    strategy: dict[str, Any]
    first_hop_text: str | None = None
    exclude_rows: tuple[int, ...] = ()

    @property
    def second_hop(self) -> Rationale | None:
        return self.rationales[self.exclude_rows[0]] if self.exclude_rows else None

    def extended(self, extra: Sequence[Rationale]) -> AutoPlan:
        """This plan with ``extra`` rationales (e.g. an LLM's) after the rule-written ones, renumbered.

        The strategy records how many were added (``"extra"``); pairing exclusions stay as they were.
        """
        start = len(self.rationales)
        added = [Rationale(r.text, start + i, r.label, r.flag_instructions) for i, r in enumerate(extra, start=1)]
        return AutoPlan([*self.rationales, *added], {**self.strategy, "extra": len(added)}, self.first_hop_text,
                        self.exclude_rows)
