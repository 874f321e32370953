"""The Evidence Chunk Selection Engine: pairing ∪ pooled elbow ∪ neighbour expansion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..documents import document_texts
from ..models.encoders import EncoderLike, embed, encoder_id
from ..errors import ConfigError, InputError
from .rationales import Rationale, as_rationales
from .stages import cosine_matrix, expand_positions, pair_rationales, pooled_scores, statistical_elbow

__all__ = ["MeteoraSelector", "SelectionResult", "check_window"]


def check_window(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
    return value


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

    @property
    def rationale_contributions(self) -> dict[int, list[int]]:
        """For each paired chunk, the rationales (1-based indices) that chose it."""
        contributions: dict[int, list[int]] = {}
        for match in self.rationale_matches:
            contributions.setdefault(match["chunk_index"], []).append(match["rationale_index"])
        return contributions

    def scores(self) -> np.ndarray:
        """Per chunk: max(pooled score, best cosine to any rationale)."""
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
            },
        }


class MeteoraSelector:
    """Select evidence chunks for a set of rationales (METEORA's ECSE).

    Args:
        encoder: anything with ``.encode(list[str])`` or a callable ``list[str] -> array``.
        expansion_window: neighbours on each side added around every selected position.
        elbow_z_threshold: z-score a drop must exceed to be the elbow of the pooled scores.
        use_pairing / use_pooling / use_expansion: stage toggles (at least one of the first
            two must stay on).

    Example:
        >>> from meteora_edge import HashingEncoder, MeteoraSelector
        >>> sel = MeteoraSelector(HashingEncoder())
        >>> res = sel.select(["Fees are due monthly.", "Either party may terminate."],
        ...                  ["termination rights of either party"])
        >>> res.selected_indices
        [0, 1]
    """

    def __init__(
        self,
        encoder: EncoderLike,
        *,
        expansion_window: int = 1,
        elbow_z_threshold: float = 1.0,
        use_pairing: bool = True,
        use_pooling: bool = True,
        use_expansion: bool = True,
    ) -> None:
        self.encoder = encoder
        self.expansion_window = check_window("expansion_window", expansion_window)
        if not isinstance(elbow_z_threshold, (int, float)) or not np.isfinite(elbow_z_threshold):
            raise ConfigError(f"elbow_z_threshold must be a finite number, got {elbow_z_threshold!r}")
        self.elbow_z_threshold = float(elbow_z_threshold)
        if not (use_pairing or use_pooling):
            raise ConfigError("use_pairing and use_pooling are both off; turn at least one on")
        self.use_pairing = bool(use_pairing)
        self.use_pooling = bool(use_pooling)
        self.use_expansion = bool(use_expansion)

    def select(
        self,
        chunks: Sequence[object],
        rationales: Sequence[str | Rationale] | str,
        *,
        chunk_vectors: np.ndarray | None = None,
    ) -> SelectionResult:
        """Run ECSE over ``chunks`` for ``rationales``.

        Args:
            chunks: documents of any accepted shape; never modified.
            rationales: a rationale text to parse, or a list of strings/Rationale objects.
            chunk_vectors: precomputed chunk embeddings (skips encoding the chunks).

        Returns:
            A :class:`SelectionResult`.

        Raises:
            InputError: no chunks, a chunk without text, or no rationale.
        """
        texts = document_texts(chunks)
        if not texts:
            raise InputError("no chunks to select from; give at least one chunk")
        parsed = as_rationales(rationales)
        if not parsed:
            raise InputError("no rationale given; pass at least one rationale or use the query as one")
        if chunk_vectors is None:
            chunk_vectors = embed(self.encoder, texts)
        rationale_vectors = embed(self.encoder, [r.text for r in parsed])
        if rationale_vectors.shape[1] != chunk_vectors.shape[1]:
            raise InputError(
                f"chunk vectors have dimension {chunk_vectors.shape[1]} but rationale vectors "
                f"{rationale_vectors.shape[1]}; embed both with the same encoder"
            )
        return self._select(chunks, parsed, rationale_vectors, chunk_vectors)

    def _select(
        self,
        chunks: Sequence[object],
        rationales: list[Rationale],
        rationale_vectors: np.ndarray,
        chunk_vectors: np.ndarray,
    ) -> SelectionResult:
        n = len(chunks)
        similarity = cosine_matrix(rationale_vectors, chunk_vectors)
        pairs = pair_rationales(similarity)
        matches = [
            {"rationale_index": r.index, "chunk_index": int(j), "score": round(float(similarity[i, j]), 6)}
            for i, (r, j) in enumerate(zip(rationales, pairs))
        ]
        pairing = sorted({int(j) for j in pairs}) if self.use_pairing else []

        pooled = pooled_scores(rationale_vectors, chunk_vectors)
        order = np.lexsort((np.arange(n), -pooled))
        elbow = statistical_elbow(pooled[order], self.elbow_z_threshold)
        pooled_keep = sorted(int(p) for p in order[: elbow + 1]) if (self.use_pooling and elbow is not None) else []

        base = sorted(set(pairing) | set(pooled_keep))
        window = self.expansion_window if self.use_expansion else 0
        selected = [int(p) for p in expand_positions(base, n, window)]
        added = sorted(set(selected) - set(base))
        return SelectionResult(
            selected_indices=selected,
            selected_chunks=[chunks[i] for i in selected],
            rationales=list(rationales),
            pairing_indices=pairing,
            pooled_indices=pooled_keep,
            expansion_indices=added,
            elbow_index=elbow,
            rationale_matches=matches,
            pooled_scores=[float(s) for s in pooled],
            pairing_scores=[float(s) for s in similarity.max(axis=0)],
            encoder=encoder_id(self.encoder),
            stages={"pairing": self.use_pairing, "pooling": self.use_pooling, "expansion": window > 0},
        )
