"""Prioritisation: order by score and drop near-duplicates of higher-ranked chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..models.encoders import normalize_rows

__all__ = ["drop_duplicates"]


def drop_duplicates(
    vectors: np.ndarray,
    order: Sequence[int],
    theta: float,
    *,
    spare: Callable[[int, list[int]], bool] | None = None,
) -> tuple[list[int], dict[int, tuple[int, float]]]:
    """Walk ``order`` (best first) and keep a row unless its cosine to a kept row exceeds ``theta``.

    Args:
        vectors: one embedding per position.
        order: positions in priority order.
        theta: redundancy threshold; cosine strictly above it is a duplicate.
        spare: asked about a row above ``theta`` with the positions kept so far; when it
            answers True the row is kept anyway (it brings what they lack).

    Returns:
        ``(kept, absorbed)``: kept positions in order, and for each dropped position the kept
        position that absorbed it with their cosine.
    """
    if len(order) == 0:
        return [], {}
    unit = normalize_rows(np.asarray(vectors, dtype=np.float64)[list(order)])
    kept_rows: list[int] = []
    kept: list[int] = []
    absorbed: dict[int, tuple[int, float]] = {}
    for row, position in enumerate(order):
        if kept_rows:
            sims = unit[kept_rows] @ unit[row]
            best = int(np.argmax(sims))
            if sims[best] > theta and not (spare is not None and spare(int(position), list(kept))):
                absorbed[int(position)] = (kept[best], float(sims[best]))
                continue
        kept_rows.append(row)
        kept.append(int(position))
    return kept, absorbed
