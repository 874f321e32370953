"""The Evidence Chunk Selection Engine: pairing ∪ pooled cut ∪ neighbour expansion.

With ``scoring="dense"`` (the default of :class:`MeteoraSelector`) this is METEORA exactly:
cosine pairing, the pooled-cosine elbow. With ``"hybrid"`` each rationale scores every chunk
by its standardised cosine plus its standardised BM25 score over the same chunks, pairing
takes the best hybrid score per rationale, and the pooled score (the mean over rationales)
is cut where chunks stand ``pooled_z`` standard deviations above the rest
(:func:`~meteora_edge.selection.stages.zscore_cut`). ``"lexical"`` uses BM25 alone. Given a
learned sparse encoder (SPLADE, ``sparse_encoder``), the lexical part is the dot product of the
rationale's and the chunk's sparse vectors instead of BM25; the term cover still reads BM25's terms.

The scores come from :mod:`~meteora_edge.selection.ecse_scoring`; the rules (pairing, pooled
cut, pairing band, term cover, neighbours) are the units of :mod:`~meteora_edge.selection.ecse_rules`,
which :meth:`MeteoraSelector.select` runs in that order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..documents import document_texts
from ..errors import ConfigError, InputError
from ..models.analyzer import Analyzer, analyzer_of
from ..models.bm25 import BM25Index
from ..models.sparse_index import SparseIndex
from ..models.encoders import EncoderLike, embed, encoder_id
from . import ecse_rules as rules
from .auto_rationales import plan_second_hop, question_rationales
from .ecse_result import AutoPlan, SelectionResult
from .ecse_rules import Evidence
from .ecse_scoring import ChunkScorer, RationaleScores
from .rationales import Rationale, as_rationales
from .stages import SCORINGS, pooled_scores

__all__ = ["AutoPlan", "MeteoraSelector", "SelectionResult", "check_window", "check_scoring", "POOLED_CUTS"]

POOLED_CUTS = ("auto", "elbow", "zscore", "robust")


def check_window(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
    return value


def check_scoring(scoring: object, pooled_cut: object = "auto") -> tuple[str, str]:
    """Validate a scoring mode and pooled cut; ``auto`` is the elbow for dense, the z-score cut otherwise."""
    if scoring not in SCORINGS:
        raise ConfigError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if pooled_cut not in POOLED_CUTS:
        raise ConfigError(f"pooled_cut must be one of {', '.join(POOLED_CUTS)}, got {pooled_cut!r}")
    if pooled_cut == "auto":
        pooled_cut = "elbow" if scoring == "dense" else "zscore"
    return str(scoring), str(pooled_cut)


class MeteoraSelector:
    """Select evidence chunks for a set of rationales (METEORA's ECSE).

    Args:
        encoder: anything with ``.encode(list[str])`` or a callable ``list[str] -> array``.
        expansion_window: neighbours on each side added around every selected position.
        elbow_z_threshold: z-score a drop must exceed to be the elbow of the pooled scores.
        use_pairing / use_pooling / use_expansion: stage toggles (at least one of the first
            two must stay on).
        scoring: ``"dense"`` (METEORA's cosine), ``"lexical"`` (BM25 over the chunks) or
            ``"hybrid"`` (standardised cosine + ``lexical_weight`` × standardised BM25).
        lexical_weight: weight of the lexical part of the hybrid score.
        sparse_encoder: a learned sparse encoder (anything with ``encode_sparse``, e.g. an
            :class:`~meteora_edge.models.sparse_encoder.OnnxSparseEncoder`); when given, its
            dot products replace BM25 as the lexical part of the score (``None``: BM25).
        pooled_cut: ``"elbow"`` (METEORA's statistical elbow), ``"zscore"`` (pooled scores at
            least ``pooled_z`` standard deviations above the mean), ``"robust"``
            (:func:`~meteora_edge.selection.stages.robust_cut`: robust z-score at least
            ``robust_z``, or within ``top_band`` of the best) or ``"auto"`` (elbow for dense
            scoring, z-score otherwise).
        pooled_z: the threshold of the z-score cut.
        pooled_gap: the z-score cut also keeps the leading block of pooled scores when the
            widest drop among the top nine is at least this many standard deviations
            (:func:`~meteora_edge.selection.stages.leading_block`); 0 turns it off.
        cover_z: also keep, walking the chunks best first while their standardised selection score
            (pooled or, if higher, best pairing score) is at least this, each chunk that holds a
            rationale term no kept chunk holds yet (:func:`~meteora_edge.selection.stages.term_cover`;
            terms as the ``analyzer`` makes them); ``None`` turns it off (METEORA).
        cover_lead: the term cover adds nothing when the best chunk leads the runner-up by this
            many standard deviations (one chunk answers).
        robust_z / top_band: the robust cut's thresholds, in robust standard deviations.
        pairing_band: with the robust cut, a rationale's best chunk is kept only when its
            pooled score lies within this many robust standard deviations of the best pooled
            score (a rationale that found nothing the question as a whole rates adds nothing);
            ``None`` keeps every pair (METEORA).
        analyzer: turns chunks and rationales into BM25 terms (lexical and hybrid scoring);
            default: the encoder's (a bundle may record one), else ``english``.

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
        scoring: str = "dense",
        lexical_weight: float = 1.0,
        pooled_cut: str = "auto",
        pooled_z: float = 2.0,
        pooled_gap: float = 0.0,
        cover_z: float | None = None,
        cover_lead: float = 0.5,
        robust_z: float = 4.0,
        top_band: float = 0.5,
        pairing_band: float | None = None,
        analyzer: Analyzer | None = None,
        sparse_encoder: object | None = None,
    ) -> None:
        self.encoder = encoder
        if sparse_encoder is not None and not hasattr(sparse_encoder, "encode_sparse"):
            raise ConfigError(f"sparse_encoder must have encode_sparse() or be None, got {type(sparse_encoder).__name__}")
        self.sparse_encoder = sparse_encoder
        if analyzer is not None and not isinstance(analyzer, Analyzer):
            raise ConfigError(f"analyzer must be an Analyzer or None, got {type(analyzer).__name__}")
        self.analyzer = analyzer if analyzer is not None else analyzer_of(encoder)
        self.scoring, self.pooled_cut = check_scoring(scoring, pooled_cut)
        for name, value in (("lexical_weight", lexical_weight), ("pooled_z", pooled_z), ("pooled_gap", pooled_gap),
                            ("robust_z", robust_z), ("top_band", top_band),
                            ("pairing_band", 0.0 if pairing_band is None else pairing_band),
                            ("cover_z", 0.0 if cover_z is None else cover_z), ("cover_lead", cover_lead)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if lexical_weight < 0:
            raise ConfigError(f"lexical_weight must be >= 0, got {lexical_weight!r}")
        self.lexical_weight = float(lexical_weight)
        self.pooled_z = float(pooled_z)
        for name, value in (("pooled_gap", pooled_gap), ("top_band", top_band), ("pairing_band", pairing_band)):
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value!r}")
        self.pooled_gap = float(pooled_gap)
        self.robust_z = float(robust_z)
        self.top_band = float(top_band)
        self.pairing_band = None if pairing_band is None else float(pairing_band)
        self.cover_z = None if cover_z is None else float(cover_z)
        if cover_lead < 0:
            raise ConfigError(f"cover_lead must be >= 0, got {cover_lead!r}")
        self.cover_lead = float(cover_lead)
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
        plan: AutoPlan | None = None,
        lexical_index: BM25Index | SparseIndex | None = None,
    ) -> SelectionResult:
        """Run ECSE over ``chunks`` for ``rationales``.

        Args:
            chunks: documents of any accepted shape; never modified.
            rationales: a rationale text to parse, or a list of strings/Rationale objects.
            chunk_vectors: precomputed chunk embeddings (skips encoding the chunks).
            plan: the :class:`AutoPlan` these rationales came from (its pairing exclusions
                and strategy are applied and recorded).
            lexical_index: a BM25 index over exactly these chunks, built with the selector's
                analyzer, or with a ``sparse_encoder`` a :class:`SparseIndex` of these chunks by it
                (skips building one; lexical and hybrid scoring only).

        Returns:
            A :class:`SelectionResult`.

        Raises:
            InputError: no chunks, a chunk without text, no rationale, or a ``lexical_index``
                over another number of chunks or with another analyzer.
        """
        texts = document_texts(chunks)
        if not texts:
            raise InputError("no chunks to select from; give at least one chunk")
        parsed = as_rationales(rationales)
        if not parsed:
            raise InputError("no rationale given; pass at least one rationale or use the query as one")
        scorer = self._scorer(texts, chunk_vectors, lexical_index)
        exclude: dict[int, int] = {}
        if plan is not None and plan.first_hop_text in texts:
            exclude = dict.fromkeys(plan.exclude_rows, texts.index(plan.first_hop_text))
        return self._select(chunks, scorer, parsed, scorer.score(parsed), exclude=exclude,
                            strategy=None if plan is None else plan.strategy)

    def plan_auto(
        self,
        chunks: Sequence[object],
        query: str,
        *,
        chunk_vectors: np.ndarray | None = None,
        lexical_index: BM25Index | SparseIndex | None = None,
    ) -> AutoPlan:
        """Write rationales by rule from ``query``: its parts, then a second hop over ``chunks``.

        The rules are in :mod:`meteora_edge.selection.auto_rationales`. The second-hop
        rationale is built from the best chunk of the first rationale; :meth:`select` with
        the plan pairs it with the best chunk other than that one. ``chunk_vectors`` and
        ``lexical_index`` are as in :meth:`select`.

        Raises:
            InputError: no chunks, a chunk without text, an empty query, or a ``lexical_index``
                that does not fit (see :meth:`select`).
        """
        texts = document_texts(chunks)
        if not texts:
            raise InputError("no chunks to select from; give at least one chunk")
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query must be a non-empty string to write rationales from it")
        parts, kind = question_rationales(query)
        strategy: dict[str, Any] = {"name": "auto", "kind": kind, "first_hop": None, "bridges": []}
        if kind != "question":
            return AutoPlan(parts, strategy)
        scorer = self._scorer(texts, chunk_vectors, lexical_index)
        first = int(np.argmax(scorer.score(parts).fused[0]))  # a plain question is one rationale
        strategy["first_hop"] = first
        others = [text for j, text in enumerate(texts) if j != first]
        hop = plan_second_hop(query, texts[first], others, index=len(parts) + 1)
        strategy["second_hop"] = hop.to_dict()
        if hop.rationale is None:
            return AutoPlan(parts, strategy, first_hop_text=texts[first])
        strategy["bridges"] = hop.bridges
        return AutoPlan([*parts, hop.rationale], strategy, first_hop_text=texts[first], exclude_rows=(len(parts),))

    def select_auto(
        self,
        chunks: Sequence[object],
        query: str,
        *,
        chunk_vectors: np.ndarray | None = None,
    ) -> SelectionResult:
        """ECSE with rationales written by rule from ``query`` (:meth:`plan_auto`, then :meth:`select`).

        ``details["rationale_strategy"]`` records the kind of question, the first-hop chunk
        and the bridge names.
        """
        texts = document_texts(chunks)
        vectors = self._chunk_vectors(texts, chunk_vectors) if texts else chunk_vectors
        lexical: BM25Index | SparseIndex | None = None
        if texts and self.scoring != "dense":
            lexical = (BM25Index.from_texts(texts, analyzer=self.analyzer) if self.sparse_encoder is None
                       else SparseIndex.from_texts(texts, encoder=self.sparse_encoder))
        plan = self.plan_auto(chunks, query, chunk_vectors=vectors, lexical_index=lexical)
        return self.select(chunks, plan.rationales, chunk_vectors=vectors, plan=plan, lexical_index=lexical)

    def _chunk_vectors(self, texts: list[str], chunk_vectors: np.ndarray | None) -> np.ndarray:
        return embed(self.encoder, texts) if chunk_vectors is None else chunk_vectors

    def _scorer(self, texts: list[str], chunk_vectors: np.ndarray | None,
                lexical: BM25Index | SparseIndex | None) -> ChunkScorer:
        return ChunkScorer(texts, self._chunk_vectors(texts, chunk_vectors), encoder=self.encoder,
                           analyzer=self.analyzer, scoring=self.scoring, lexical_weight=self.lexical_weight,
                           sparse_encoder=self.sparse_encoder, lexical=lexical)

    def _select(
        self,
        chunks: Sequence[object],
        scorer: ChunkScorer,
        rationales: list[Rationale],
        scores: RationaleScores,
        *,
        exclude: dict[int, int],
        strategy: dict[str, Any] | None,
    ) -> SelectionResult:
        """Run the rules of :mod:`~meteora_edge.selection.ecse_rules` in order over one set of scores."""
        dense_pooled = pooled_scores(scores.rationale_vectors, scorer.chunk_vectors)
        evidence = Evidence(scores.fused, dense_pooled if self.scoring == "dense" else scores.fused.mean(axis=0))
        paired = rules.pairing(evidence, exclude=exclude)
        matches = [
            {"rationale_index": r.index, "chunk_index": j, "score": round(float(scores.fused[i, j]), 6)}
            for i, (r, j) in enumerate(zip(rationales, paired.trace["pairs"]))
        ]
        pairing = paired.kept if self.use_pairing else []
        cut = rules.pooled_cut(evidence, rule=self.pooled_cut, elbow_z=self.elbow_z_threshold, pooled_z=self.pooled_z,
                               pooled_gap=self.pooled_gap, robust_z_min=self.robust_z, top_band=self.top_band,
                               pairing_band=self.pairing_band)
        cut_details = cut.trace["cut"]
        if self.pooled_cut == "robust" and self.pairing_band is not None and pairing:
            banded = rules.pairing_band(evidence, pairing, band=self.pairing_band)
            pairing, cut_details = banded.kept, {**cut_details, **banded.trace}
        pooled_keep = sorted(cut.kept) if self.use_pooling else []
        base = sorted(set(pairing) | set(pooled_keep))
        if self.cover_z is not None:
            lexical = scorer.lexical_index()
            terms = dict.fromkeys(t for r in rationales for t in self.analyzer.tokens(r.text))
            covered = rules.term_cover(evidence, base, holders=[lexical.documents_with(t) for t in terms],
                                       z_min=self.cover_z, lead=self.cover_lead)
            cut_details = {**(cut_details or {}), **covered.trace}
            base = sorted(set(base) | set(covered.kept))
        window = self.expansion_window if self.use_expansion else 0
        expanded = rules.neighbours(evidence, base, window=window)
        selected = expanded.trace["selected"]
        return SelectionResult(
            selected_indices=selected,
            selected_chunks=[chunks[i] for i in selected],
            rationales=list(rationales),
            pairing_indices=pairing,
            pooled_indices=pooled_keep,
            expansion_indices=expanded.kept,
            elbow_index=cut.trace["elbow"],
            rationale_matches=matches,
            pooled_scores=[float(s) for s in evidence.pooled],
            pairing_scores=[float(s) for s in scores.fused.max(axis=0)],
            encoder=encoder_id(self.encoder),
            stages={"pairing": self.use_pairing, "pooling": self.use_pooling, "expansion": window > 0},
            scoring=self.scoring,
            dense_scores=[float(s) for s in dense_pooled],
            lexical_scores=None if scores.lexical is None else [float(s) for s in scores.lexical.mean(axis=0)],
            pooled_cut=self.pooled_cut,
            strategy=strategy,
            rationale_vectors=scores.rationale_vectors,
            cut=cut_details,
        )
