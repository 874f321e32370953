"""The token cover: accept the chunks that match a word of the question no accepted chunk matches yet.

A question that needs several facts names a piece of each ("Which property of a mineral can be
determined just by looking at it?": a property, a mineral, looking). Every word of the question
should find a close word in some kept chunk. The term cover (:func:`.stages.term_cover`) asks
that of whole terms after stemming; this one asks it of the encoder's word-piece vectors before
pooling, so "terminate" is matched by "end" and "looking" by "observe" (BERTScore's recall).

For each word piece ``i`` of the question and each chunk ``j``, ``m[j, i]`` is the best cosine
between the piece and a piece of the chunk. Pieces are weighted by their IDF over the
candidates (stop words and punctuation weigh nothing; weights sum to 1), so the coverage of a
set of chunks ``K`` is ``sum_i w_i max_{j in K} m[j, i]``. Walking the candidates best first
while their standardised selection score is high enough, a chunk is added when it raises that
coverage by at least ``min_gain``: a question whose words one chunk covers adds nothing, one
whose words are spread over four facts adds the facts that bring the uncovered words.

The pipeline runs it after the verification rung (:func:`cover_query`): a fact that answers one
part of a multi-part question has a low cosine to the question as a whole, so the cosine rung
rejects it, while the words it brings show what it is for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .stages import standardise

__all__ = ["piece_weights", "best_matches", "token_cover", "cover_query", "has_word_pieces", "NO_WORD_PIECES", "QueryCover", "QueryMatcher"]

_MARKS = ("##", "\u2581", "\u0120")  # WordPiece continuation, SentencePiece and byte-level BPE word starts


def piece_weights(query: Sequence[str], chunks: Sequence[Sequence[str]], stop_words: frozenset[str]) -> np.ndarray:
    """IDF weight of each question piece over ``chunks`` (each a list of pieces), summing to 1.

    A piece without a letter or digit, or that is a stop word, weighs 0; when every piece does,
    the weights are all 0 (the question has no content to cover).

    Example:
        >>> piece_weights(["the", "mineral", "##s", "?"], [["mineral"], ["rock"]], frozenset({"the"})).round(3).tolist()
        [0.0, 0.401, 0.599, 0.0]
    """
    frequency: dict[str, int] = {}
    for pieces in chunks:
        for piece in set(pieces):
            frequency[piece] = frequency.get(piece, 0) + 1
    n = len(chunks)
    weights = np.zeros(len(query), dtype=np.float64)
    for i, piece in enumerate(query):
        word = piece
        for mark in _MARKS:
            word = word.removeprefix(mark)
        if any(c.isalnum() for c in word) and (piece.startswith("##") or word.lower() not in stop_words):
            weights[i] = math.log((n + 1) / (frequency.get(piece, 0) + 1)) + 1
    total = weights.sum()
    return weights / total if total > 0 else weights


def best_matches(query: np.ndarray, chunks: Sequence[np.ndarray]) -> np.ndarray:
    """``(len(chunks), pieces)``: each question piece's best cosine to a piece of each chunk.

    ``query`` and every chunk are unit-length piece vectors, one row per piece; a chunk with no
    pieces matches nothing (0).
    """
    out = np.zeros((len(chunks), len(query)), dtype=np.float64)
    for j, vectors in enumerate(chunks):
        if len(vectors) and len(query):
            out[j] = (np.asarray(query, dtype=np.float64) @ np.asarray(vectors, dtype=np.float64).T).max(axis=1)
    return out


def token_cover(
    matches: dict[int, np.ndarray], weights: np.ndarray, kept: Sequence[int], walk: Sequence[int], *, min_gain: float
) -> tuple[list[int], list[float]]:
    """The chunks of ``walk`` (best first) to add, and the coverage each added.

    ``matches[p]`` is chunk ``p``'s row of :func:`best_matches`, for every chunk of ``kept`` and
    ``walk``. A chunk is added when it raises the weighted coverage of the question's pieces by
    at least ``min_gain``; what it covers counts as covered for the chunks after it.

    Example:
        >>> rows = {0: np.array([0.9, 0.1]), 1: np.array([0.8, 0.2]), 2: np.array([0.1, 0.9])}
        >>> token_cover(rows, np.array([0.5, 0.5]), [0], [1, 2], min_gain=0.1)  # 1 adds only 0.05
        ([2], [0.4])
    """
    width = len(weights)
    covered = np.max([matches[p] for p in kept], axis=0) if len(kept) else np.zeros(width)
    added: list[int] = []
    gains: list[float] = []
    for p in walk:
        gain = float(weights @ np.maximum(matches[p] - covered, 0.0))
        if gain >= min_gain:
            added.append(int(p))
            gains.append(round(gain, 6))
            covered = np.maximum(covered, matches[p])
    return added, gains


class QueryMatcher:
    """A query's word pieces, their weights over the candidates, and each candidate's row of
    :func:`best_matches`, computed when first asked for (the encoder runs on the query and the
    asked chunks only, all missing ones in one call).

    ``encoder`` must have ``pieces`` and ``token_vectors`` (the ONNX encoder).
    """

    def __init__(self, encoder: Any, query: str, texts: Sequence[str], stop_words: frozenset[str]) -> None:
        self.encoder, self.query, self.texts = encoder, query, texts
        self.pieces, *chunk_pieces = encoder.pieces([query, *texts])
        self.weights = piece_weights(self.pieces, chunk_pieces, stop_words)
        self._query: np.ndarray | None = None
        self._rows: dict[int, np.ndarray] = {}

    def rows(self, positions: Sequence[int]) -> dict[int, np.ndarray]:
        """Each position's best-match row (one encoder call for those not computed yet)."""
        todo = [int(p) for p in dict.fromkeys(positions) if int(p) not in self._rows]
        if todo:
            head = [self.query] if self._query is None else []
            vectors = self.encoder.token_vectors([*head, *(self.texts[p] for p in todo)])
            if head:
                self._query, vectors = vectors[0], vectors[1:]
            self._rows.update(zip(todo, best_matches(self._query, vectors)))
        return {int(p): self._rows[int(p)] for p in positions}

    def gain(self, position: int, kept: Sequence[int]) -> float:
        """The weighted share of the query's pieces chunk ``position`` matches better than every
        chunk of ``kept`` does: what it adds to them (all of its coverage when ``kept`` is empty)."""
        rows = self.rows([position, *kept])
        covered = np.max([rows[p] for p in kept], axis=0) if len(kept) else np.zeros(len(self.weights))
        return float(self.weights @ np.maximum(rows[position] - covered, 0.0))


@dataclass(frozen=True)
class QueryCover:
    """What :func:`cover_query` added (best first), the coverage each brought, the query pieces it
    covered, and why it added nothing when it could not run (``skipped``); when it ran, the
    ``matcher`` it used (later steps can ask it what a chunk adds)."""

    added: list[int] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    words: list[list[str]] = field(default_factory=list)
    skipped: str | None = None
    matcher: QueryMatcher | None = None


NO_WORD_PIECES = "the encoder gives no word-piece vectors"  # why the cover cannot run with, e.g., the hashing encoder


def has_word_pieces(encoder: Any) -> bool:
    """Whether ``encoder`` gives the word pieces and their vectors the token cover needs (the ONNX
    encoder does; the hashing encoder does not)."""
    return getattr(encoder, "pieces", None) is not None and getattr(encoder, "token_vectors", None) is not None


def cover_query(
    encoder: Any,
    query: str,
    texts: Sequence[str],
    scores: np.ndarray,
    kept: Sequence[int],
    eligible: Sequence[int],
    *,
    min_gain: float,
    z_min: float,
    stop_words: frozenset[str],
    max_walk: int | None = None,
) -> QueryCover:
    """Run the token cover for ``query`` over the candidates ``texts``.

    Walks the ``eligible`` positions best first by ``scores`` (the selection score) while their
    standardised score is at least ``z_min`` and adds each that raises the coverage of the
    query's word pieces, given ``kept``, by ``min_gain`` (:func:`token_cover`). The piece weights
    are IDF over every candidate (tokenising only); the encoder runs on the query, ``kept`` and
    the walk alone. It needs an encoder with ``pieces`` and ``token_vectors`` (the ONNX encoder)
    and at least one kept chunk; otherwise nothing is added and ``skipped`` says why. ``max_walk``
    cuts the walk to its best chunks (each costs an encoder run over its text).
    """
    if not has_word_pieces(encoder):
        return QueryCover(skipped=NO_WORD_PIECES)
    if not kept:
        return QueryCover(skipped="no chunk accepted to extend")
    matcher = QueryMatcher(encoder, query, texts, stop_words)
    if not matcher.weights.any():
        return QueryCover(skipped="the query has no content words")
    values = np.asarray(scores, dtype=np.float64)
    z = standardise(values)
    allowed = {int(p) for p in eligible} - {int(p) for p in kept}
    walk = [int(p) for p in np.lexsort((np.arange(len(values)), -values)) if z[p] >= z_min and int(p) in allowed]
    if max_walk is not None:
        walk = walk[:max_walk]
    if not walk:
        return QueryCover(matcher=matcher)
    weights = matcher.weights
    matches = matcher.rows([*kept, *walk])
    added, gains = token_cover(matches, weights, kept, walk, min_gain=min_gain)
    covered = np.max([matches[p] for p in kept], axis=0)
    words = []
    for p in added:  # the pieces each addition lifted most (the trace's "why")
        lift = weights * np.maximum(matches[p] - covered, 0.0)
        words.append([matcher.pieces[i] for i in np.argsort(-lift, kind="stable")[:3] if lift[i] > 0])
        covered = np.maximum(covered, matches[p])
    return QueryCover(added, gains, words, matcher=matcher)
