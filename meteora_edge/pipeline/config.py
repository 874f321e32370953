"""The pipeline's settings: one frozen, keyword-only dataclass, validated at construction."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..errors import ConfigError
from ..selection.ecse import check_scoring, check_window
from .ladder import RUNGS

__all__ = ["PipelineConfig", "RATIONALE_STRATEGIES", "LEXICAL_SCORERS", "default_window", "is_ordered_document", "select_config"]

RATIONALE_STRATEGIES = ("auto", "query", "llm+auto")
LEXICAL_SCORERS = ("auto", "bm25", "sparse")


def _check_int(name: str, value: object, low: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}{' or None' if optional else ''}, got {value!r}")


def _check_float(name: str, value: object, low: float, high: float, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"{name} must be a number in [{low}, {high}]{' or None' if optional else ''}, got {value!r}")


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of every phase; pass them by keyword. ``None`` turns a phase off.

    Args:
        k_init: candidates fetched from an index (kNN, plus BM25 when scoring is not dense).
        scoring: how chunks are scored wherever the pipeline ranks them — ``"hybrid"``
            (standardised cosine + ``lexical_weight`` × standardised BM25, the default),
            ``"dense"`` (cosine; ECSE is then METEORA exactly) or ``"lexical"`` (BM25).
        lexical_weight: weight of the lexical part (BM25 or the sparse model) in the hybrid score.
        lexical_scorer: what the lexical part of the score is — ``"bm25"`` (Okapi BM25 over the
            analyser's terms, model-free), ``"sparse"`` (the dot product of learned sparse
            vectors, SPLADE: needs a bundle with a ``sparse_encoder``) or ``"auto"`` (the one the
            index was built with; for given passages BM25, see
            :data:`~meteora_edge.pipeline.retrieval.AUTO_FOR_PASSAGES`). The fallback phase always uses BM25.
        rationales: where the rationales come from when none are given — ``"auto"`` (the
            generator's when there is one, else the question's parts and a second hop written
            by rule, see :mod:`meteora_edge.selection.auto_rationales`), ``"query"`` (the
            generator's, else the question) or ``"llm+auto"`` (the rule-written ones *and* the
            generator's, which join them in ECSE; without a generator the same as ``"auto"``).
        use_ecse: run ECSE selection on the candidates (off: pure MeVe, verify all).
        expansion_window: ECSE neighbour expansion (0 for independent passages).
        elbow_z_threshold: the statistical elbow's threshold (``pooled_cut="elbow"``).
        llm_pool: with a relevance scorer (an LLM), ECSE's selection and its next-best
            candidates, this many in all, are scored by the LLM and re-cut (see
            :mod:`meteora_edge.pipeline.rerank`); ``None`` turns the LLM rerank off.
        llm_weight: weight of the LLM's standardised score against ECSE's in the rerank.
        llm_z: the rerank keeps pooled chunks this many standard deviations above the pool's mean.
        pooled_cut: ECSE's cut of the pooled scores: ``"auto"`` (the elbow for dense scoring,
            the z-score cut otherwise), ``"elbow"``, ``"zscore"`` or ``"robust"`` (the median and
            scaled MAD of the candidates as the yardstick, see ``robust_z``).
        pooled_z: the z-score cut keeps chunks this many standard deviations above the mean.
        pooled_gap: the z-score cut also keeps the leading block of pooled scores, the chunks
            above the widest drop among the top nine, when that drop is at least this many
            standard deviations (one chunk when one stands out, five when five do); 0: off.
        cover_z: the term cover: walking the candidates best first while their standardised
            selection score is at least this, ECSE also keeps each that holds a rationale term
            no kept chunk holds yet, so a question whose words are spread over several facts
            keeps those facts (see :func:`~meteora_edge.selection.stages.term_cover`); ``None``: off.
            It is the token cover's stand-in: it runs only where the token cover cannot (no
            ``token_cover``, no verification rung, an LLM rerank, or an encoder without word
            pieces), since the two cover the same need and the token cover does it better.
        cover_lead: the term cover adds nothing when the best candidate leads the runner-up by
            this many standard deviations (one chunk answers).
        token_cover: the token cover: after the verification rung, walking the candidates it did
            not accept best first while their standardised selection score is at least
            ``token_cover_z``, the pipeline also accepts each that raises by at least this the share
            of the query's words (word pieces, IDF-weighted, each counted by its best cosine in an
            accepted chunk) that the accepted chunks match, so a question whose words are spread over
            several facts keeps those facts even when they say it in other words (see
            :mod:`~meteora_edge.selection.token_cover`; a model rung reads each addition first); runs
            only with a verification rung and not after an LLM rerank; needs an ONNX encoder (the
            hashing encoder has no word pieces); ``None``: off.
        token_cover_z: where the token cover's walk stops, in standard deviations of the
            selection score (0.5: as deep as the term cover it replaces walks).
        robust_z: the robust cut keeps chunks whose pooled score lies at least this many robust
            standard deviations (median and scaled MAD of the candidates) above the median:
            the outliers, however many there are.
        top_band: the robust cut also keeps chunks within this many robust standard deviations
            of the best pooled score (the best is always kept).
        pairing_band: with the robust cut, a rationale's best chunk joins the selection only
            when its pooled score lies within this many robust standard deviations of the best
            (``None``: every rationale's best chunk joins, as in METEORA).
        verification: ``auto`` | ``llm`` | ``cross-encoder`` | ``cosine`` | ``none``.
        tau_relevance: threshold of the cross-encoder and cosine rungs, in [-1, 1] (the range
            of a cosine; the cross-encoder's probability needs [0, 1]). ``None`` (the default):
            the rung's own — for the cosine rung the encoder's calibrated threshold (a bundle
            may record ``cosine_tau``; 0.35 for an ONNX encoder without one, 0.1 for the hashing
            encoder, see :func:`~meteora_edge.models.encoders.cosine_tau`), 0.4 for the cross-encoder.
        verification_batch: chunks judged per prompt by a batch verifier (one with
            ``verify_batch``, e.g. ``LlamaBatchVerifier``); a one-chunk verifier ignores it.
        n_min: BM25 fallback fires when fewer chunks survive verification (None: never).
        theta_redundancy: cosine above which a lower-ranked chunk is a duplicate (None: keep all).
        spare_new_words: a chunk above ``theta_redundancy`` is kept anyway when it matches words
            of the query that the chunks kept before it do not, by at least ``token_cover`` (the
            token cover's own test): two sentences of one article or one contract are close as
            wholes yet may answer different parts of a question. Only when the token cover ran.
        t_max: token budget (None: unlimited).
        oversize: what happens to a chunk larger than the whole budget: ``drop`` or ``truncate``.
        max_candidates / max_chunk_chars / max_rationales: resource limits.
    """

    k_init: int = 50
    scoring: str = "hybrid"
    lexical_weight: float = 1.0
    lexical_scorer: str = "auto"
    rationales: str = "auto"
    use_ecse: bool = True
    expansion_window: int = 0
    elbow_z_threshold: float = 1.0
    pooled_cut: str = "auto"
    pooled_z: float = 2.0
    pooled_gap: float = 0.5
    cover_z: float | None = 0.5
    cover_lead: float = 0.5
    token_cover: float | None = 0.05
    token_cover_z: float = 0.5
    robust_z: float = 4.0
    top_band: float = 0.5
    pairing_band: float | None = None
    llm_pool: int | None = 8
    llm_weight: float = 1.5
    llm_z: float = 0.5
    verification: str = "auto"
    tau_relevance: float | None = None
    verification_batch: int = 8
    n_min: int | None = 1
    theta_redundancy: float | None = 0.85
    spare_new_words: bool = True
    t_max: int | None = 512
    oversize: str = "drop"
    max_candidates: int = 10_000
    max_chunk_chars: int = 100_000
    max_rationales: int = 32

    def __post_init__(self) -> None:
        _check_int("k_init", self.k_init, 1)
        check_scoring(self.scoring, self.pooled_cut)
        _check_float("lexical_weight", self.lexical_weight, 0.0, 1e6)
        if self.lexical_scorer not in LEXICAL_SCORERS:
            raise ConfigError(f"lexical_scorer must be one of {', '.join(LEXICAL_SCORERS)}, got {self.lexical_scorer!r}")
        if self.rationales not in RATIONALE_STRATEGIES:
            raise ConfigError(f"rationales must be one of {', '.join(RATIONALE_STRATEGIES)}, got {self.rationales!r}")
        if not isinstance(self.use_ecse, bool):
            raise ConfigError(f"use_ecse must be true or false, got {self.use_ecse!r}")
        check_window("expansion_window", self.expansion_window)
        _check_float("elbow_z_threshold", self.elbow_z_threshold, -100.0, 100.0)
        _check_float("pooled_z", self.pooled_z, -100.0, 100.0)
        _check_float("pooled_gap", self.pooled_gap, 0.0, 100.0)
        _check_float("cover_z", self.cover_z, -100.0, 100.0, optional=True)
        _check_float("cover_lead", self.cover_lead, 0.0, 100.0)
        _check_float("token_cover", self.token_cover, 0.0, 1.0, optional=True)
        _check_float("token_cover_z", self.token_cover_z, -100.0, 100.0)
        _check_float("robust_z", self.robust_z, -100.0, 100.0)
        _check_float("top_band", self.top_band, 0.0, 100.0)
        _check_float("pairing_band", self.pairing_band, 0.0, 100.0, optional=True)
        _check_int("llm_pool", self.llm_pool, 1, optional=True)
        _check_float("llm_weight", self.llm_weight, 0.0, 1e6)
        _check_float("llm_z", self.llm_z, -100.0, 100.0)
        if self.verification not in RUNGS:
            raise ConfigError(f"verification must be one of {', '.join(RUNGS)}, got {self.verification!r}")
        _check_float("tau_relevance", self.tau_relevance, -1.0, 1.0, optional=True)
        _check_int("verification_batch", self.verification_batch, 1)
        _check_int("n_min", self.n_min, 0, optional=True)
        _check_float("theta_redundancy", self.theta_redundancy, -1.0, 1.0, optional=True)
        if not isinstance(self.spare_new_words, bool):
            raise ConfigError(f"spare_new_words must be true or false, got {self.spare_new_words!r}")
        _check_int("t_max", self.t_max, 1, optional=True)
        if self.oversize not in ("drop", "truncate"):
            raise ConfigError(f"oversize must be 'drop' or 'truncate', got {self.oversize!r}")
        _check_int("max_candidates", self.max_candidates, 1)
        _check_int("max_chunk_chars", self.max_chunk_chars, 1)
        _check_int("max_rationales", self.max_rationales, 1)

    @property
    def effective_pooled_cut(self) -> str:
        """``pooled_cut`` with ``auto`` resolved for this scoring."""
        return check_scoring(self.scoring, self.pooled_cut)[1]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineConfig:
        """Build from a mapping, refusing unknown keys."""
        if not isinstance(data, dict):
            raise ConfigError(f"pipeline config must be an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown pipeline setting(s) {unknown}; known: {sorted(known)}")
        return cls(**data)


# -- the settings `select` runs with (the CLI, the server and the adapters share them) ---------

def _offsets_and_source(chunk: object) -> tuple[int, int, object] | None:
    if not isinstance(chunk, Mapping):
        return None
    start = chunk.get("start_pos", chunk.get("start"))
    end = chunk.get("end_pos", chunk.get("end"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return None
    meta = chunk.get("metadata")
    source = chunk.get("source") or (meta.get("source") if isinstance(meta, Mapping) else None)
    return start, end, source  # type: ignore[return-value]


def is_ordered_document(chunks: Sequence[object]) -> bool:
    """Whether the chunks are consecutive pieces of one document: every chunk has integer
    offsets, all name the same source (or none), and the offsets never go backwards."""
    spans = [_offsets_and_source(c) for c in chunks]
    if len(spans) < 2 or any(s is None for s in spans):
        return False
    if len({s[2] for s in spans}) != 1:  # type: ignore[index]
        return False
    return all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(spans, spans[1:]))  # type: ignore[index]


def default_window(chunks: Sequence[object] | None) -> int:
    """The expansion window when none is given: 1 when the chunks are one ordered document
    (see :func:`is_ordered_document`), else 0 — for independent passages a neighbour is noise."""
    return 1 if chunks is not None and is_ordered_document(chunks) else 0


def select_config(settings: Mapping[str, Any], *, from_index: bool, chunks: Sequence[object] | None) -> PipelineConfig:
    """The configuration ``select`` runs with, from the settings a caller gave by name.

    Index runs start from :class:`PipelineConfig`'s defaults. Given chunks run only the phases
    asked for: ``n_min``, ``theta_redundancy`` and ``t_max`` stay off unless given, and
    verification is ``none`` unless ``verification`` or ``tau_relevance`` is given. The
    expansion window defaults to :func:`default_window` of the chunks. A setting given as
    ``None`` counts as not given, except for the three optional phases, ``cover_z`` and
    ``token_cover`` (``None`` turns them off).

    Args:
        settings: :class:`PipelineConfig` field names and values.
        from_index: the candidates come from an index.
        chunks: the given chunks (``None`` with an index).

    Returns:
        The validated :class:`PipelineConfig`.

    Raises:
        ConfigError: an unknown setting or a value out of range.
    """
    optional = ("n_min", "theta_redundancy", "t_max")  # off for given chunks unless given
    off_when_none = (*optional, "cover_z", "token_cover")  # None turns these off; for the other settings it means "not given"
    given = {k: v for k, v in settings.items() if v is not None or k in off_when_none}
    merged: dict[str, Any] = {} if from_index else dict.fromkeys(optional)
    merged.update(given)
    merged.setdefault("expansion_window", default_window(chunks))
    if "verification" not in given:
        merged["verification"] = "auto" if from_index or "tau_relevance" in given else "none"
    return PipelineConfig.from_dict(merged)
