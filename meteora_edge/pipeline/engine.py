"""The edge pipeline: one data flow from a query to a verified, de-duplicated, budgeted context.

Phases (each recorded in the :class:`~meteora_edge.pipeline.trace.Trace`):

1. ``candidates`` — kNN over a local index (``k_init``) or the caller's passages;
2. ``selection``  — rationales (given / generator / the query) and ECSE;
3. ``verify``     — the verification ladder (LLM → cross-encoder → cosine → none);
4. ``fallback``   — BM25 when fewer than ``n_min`` chunks survive;
5. ``prioritise`` — order by score, drop chunks whose cosine to a kept one exceeds ``theta``;
6. ``budget``     — greedy packing into ``t_max`` tokens of the answer model's tokenizer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ..index.bm25 import BM25Index, bm25_tokens
from .budget import TokenCounter, WhitespaceCounter, pack
from ..documents import document_texts
from ..selection.ecse import MeteoraSelector, check_window
from ..models.encoders import EncoderLike, HashingEncoder, embed, encoder_id
from ..errors import ConfigError, InputError, LocalIndexError
from .ladder import RUNGS, CrossEncoder, choose_rung, run_ladder
from ..index.local_index import LocalIndex
from ..index.memory_index import InMemoryIndex
from .prioritise import drop_duplicates
from ..selection.reranker import RationaleGenerator, resolve_rationales
from .trace import CandidateRecord, PhaseRecord, Trace
from ..selection.verification import VerifierLike

__all__ = ["PipelineConfig", "EvidencePipeline", "PipelineResult"]


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
        k_init: candidates fetched by kNN from an index.
        use_ecse: run ECSE selection on the candidates (off: pure MeVe, verify all).
        expansion_window: ECSE neighbour expansion (0 for independent kNN results).
        elbow_z_threshold: ECSE elbow threshold.
        verification: ``auto`` | ``llm`` | ``cross-encoder`` | ``cosine`` | ``none``.
        tau_relevance: threshold of the cross-encoder and cosine rungs.
        n_min: BM25 fallback fires when fewer chunks survive verification (None: never).
        theta_redundancy: cosine above which a lower-ranked chunk is a duplicate (None: keep all).
        t_max: token budget (None: unlimited).
        oversize: what happens to a chunk larger than the whole budget: ``drop`` or ``truncate``.
        max_candidates / max_chunk_chars / max_rationales: resource limits.
    """

    k_init: int = 20
    use_ecse: bool = True
    expansion_window: int = 0
    elbow_z_threshold: float = 1.0
    verification: str = "auto"
    tau_relevance: float = 0.4
    n_min: int | None = 3
    theta_redundancy: float | None = 0.85
    t_max: int | None = 512
    oversize: str = "drop"
    max_candidates: int = 10_000
    max_chunk_chars: int = 100_000
    max_rationales: int = 32

    def __post_init__(self) -> None:
        _check_int("k_init", self.k_init, 1)
        check_window("expansion_window", self.expansion_window)
        _check_float("elbow_z_threshold", self.elbow_z_threshold, -100.0, 100.0)
        if self.verification not in RUNGS:
            raise ConfigError(f"verification must be one of {', '.join(RUNGS)}, got {self.verification!r}")
        _check_float("tau_relevance", self.tau_relevance, -1e6, 1e6)
        _check_int("n_min", self.n_min, 0, optional=True)
        _check_float("theta_redundancy", self.theta_redundancy, -1.0, 1.0, optional=True)
        _check_int("t_max", self.t_max, 1, optional=True)
        if self.oversize not in ("drop", "truncate"):
            raise ConfigError(f"oversize must be 'drop' or 'truncate', got {self.oversize!r}")
        _check_int("max_candidates", self.max_candidates, 1)
        _check_int("max_chunk_chars", self.max_chunk_chars, 1)
        _check_int("max_rationales", self.max_rationales, 1)

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


@dataclass(frozen=True)
class PipelineResult:
    """The budgeted context: passages in priority order, their ids, scores and the trace."""

    passages: list[str]
    documents: list[Any]
    ids: list[int]
    scores: list[float]
    tokens: int
    trace: Trace = field(repr=False)

    @property
    def context(self) -> str:
        return "\n\n".join(self.passages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passages": list(self.passages),
            "ids": list(self.ids),
            "scores": [round(s, 6) for s in self.scores],
            "tokens": self.tokens,
            "trace": self.trace.to_dict(),
        }


class EvidencePipeline:
    """METEORA selection and MeVe's phases as one pipeline.

    Args:
        config: phase settings.
        encoder: embeds queries, rationales and passages (defaults to :class:`HashingEncoder`;
            with an index it must be the index's encoder).
        index: a :class:`LocalIndex` to retrieve from (else pass ``passages`` to :meth:`run`).
        rationale_generator: e.g. a ``LlamaRationaleGenerator``.
        verifier: e.g. a ``LlamaVerifier`` (the top rung of the ladder).
        cross_encoder: any object with ``score(query, passages)`` (the second rung).
        token_counter: the answer model's tokenizer (default: whitespace words).

    Example:
        >>> from meteora_edge import EvidencePipeline, PipelineConfig
        >>> pipe = EvidencePipeline(PipelineConfig(verification="none", t_max=20))
        >>> res = pipe.run("who may terminate?", passages=["Either party may terminate.", "Fees are monthly."])
        >>> res.passages[0]
        'Either party may terminate.'
    """

    def __init__(
        self,
        config: PipelineConfig | None = None,
        *,
        encoder: EncoderLike | None = None,
        index: LocalIndex | InMemoryIndex | None = None,
        rationale_generator: RationaleGenerator | None = None,
        verifier: VerifierLike | None = None,
        cross_encoder: CrossEncoder | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self.encoder = encoder if encoder is not None else HashingEncoder()
        if index is not None and encoder_id(self.encoder) != index.encoder_id:
            raise LocalIndexError(
                f"the index was built with encoder {index.encoder_id!r}, not {encoder_id(self.encoder)!r}; "
                "use the same --bundle or rebuild the index"
            )
        self.index = index
        self.rationale_generator = rationale_generator
        self.verifier = verifier
        self.cross_encoder = cross_encoder
        self.token_counter = token_counter or WhitespaceCounter()
        self.rung = choose_rung(self.config.verification, verifier=verifier, cross_encoder=cross_encoder)

    def run(
        self,
        query: str,
        *,
        passages: Sequence[object] | None = None,
        rationales: object | None = None,
    ) -> PipelineResult:
        """Run every phase for ``query``.

        Args:
            query: the question (non-empty).
            passages: candidate documents of any accepted shape; without them the index is searched.
            rationales: given rationales (text or list); else the generator, else the query.

        Returns:
            A :class:`PipelineResult`; its ``documents`` are the caller's objects (or the index records).

        Raises:
            InputError: empty query, no passages and no index, or inputs over the limits.
        """
        cfg = self.config
        if not isinstance(query, str) or not query.strip():
            raise InputError("query must be a non-empty string")
        if len(query) > cfg.max_chunk_chars:
            raise InputError(f"query has {len(query)} characters, over max_chunk_chars={cfg.max_chunk_chars}")
        trace = Trace(query=query, config={**cfg.to_dict(), "rung": self.rung, "encoder": encoder_id(self.encoder),
                                            "encoder_precision": getattr(self.encoder, "precision_choice", None),
                                            "tokenizer": self.token_counter.identity})
        run = _Run(self, query, trace)
        run.candidates(passages)
        run.selection(rationales)
        run.verify()
        run.fallback()
        run.prioritise()
        return run.budget()


class _Run:
    """The state of one pipeline run; each method is one phase."""

    def __init__(self, pipe: EvidencePipeline, query: str, trace: Trace) -> None:
        self.pipe, self.cfg, self.query, self.trace = pipe, pipe.config, query, trace
        self.texts: list[str] = []
        self.docs: list[Any] = []
        self.ids: list[int] = []
        self.labels: list[Any] = []
        self.vectors = np.zeros((0, 1), dtype=np.float32)
        self.query_vector = np.zeros(0, dtype=np.float32)
        self.records: list[CandidateRecord] = []
        self.rationales: list[Any] = []
        self.order: list[int] = []
        self.priority: dict[int, float] = {}
        self.accepted: list[int] = []
        self.flagged: set[int] = set()
        self.fallback_added: list[int] = []
        self.final: list[int] = []

    def _phase(self, name: str, started: float, summary: str, **details: Any) -> None:
        self.trace.phases.append(PhaseRecord(name, (time.perf_counter() - started) * 1000, summary, details))

    def _add(self, text: str, doc: Any, chunk_id: int, label: Any, score: float | None) -> int:
        position = len(self.texts)
        self.texts.append(text)
        self.docs.append(doc)
        self.ids.append(chunk_id)
        self.labels.append(label)
        self.records.append(CandidateRecord(position, label, text, retrieval_score=score))
        return position

    def candidates(self, passages: Sequence[object] | None) -> None:
        t0 = time.perf_counter()
        cfg, pipe = self.cfg, self.pipe
        self.query_vector = embed(pipe.encoder, [self.query])[0]
        if passages is not None:
            texts = document_texts(passages)
            if len(texts) > cfg.max_candidates:
                raise InputError(f"{len(texts)} passages, over max_candidates={cfg.max_candidates}; raise the limit or pre-filter")
            long = next((i for i, t in enumerate(texts) if len(t) > cfg.max_chunk_chars), None)
            if long is not None:
                raise InputError(f"passage {long} has {len(texts[long])} characters, over max_chunk_chars={cfg.max_chunk_chars}")
            vectors = embed(pipe.encoder, texts) if texts else np.zeros((0, self.query_vector.shape[0]))
            scores = _cosines(vectors, self.query_vector)
            for i, text in enumerate(texts):
                self._add(text, passages[i], i, i, float(scores[i]))
            self.vectors = np.asarray(vectors, dtype=np.float32)
            source = "passages"
        elif pipe.index is not None:
            ids, scores = pipe.index.search(self.query_vector, cfg.k_init)
            records = pipe.index.records(ids.tolist())
            for chunk_id, score, record in zip(ids.tolist(), scores.tolist(), records):
                self._add(record["text"], record, int(chunk_id), record.get("id", chunk_id), float(score))
            self.vectors = np.asarray(pipe.index.vectors[ids], dtype=np.float32)
            source = "knn"
        else:
            raise InputError("no candidates: pass passages=… or build the pipeline with an index")
        self.order = list(range(len(self.texts)))
        for i, r in enumerate(self.records):
            self.priority[i] = r.retrieval_score if r.retrieval_score is not None else 0.0
        self._phase("candidates", t0, f"{len(self.texts)} candidates from {source}", source=source,
                    k_init=cfg.k_init if source == "knn" else None)

    def selection(self, rationales: object | None) -> None:
        t0 = time.perf_counter()
        pipe, cfg = self.pipe, self.cfg
        chosen, origin = resolve_rationales(self.query, rationales, pipe.rationale_generator, fallback_to_query=True)
        if len(chosen) > cfg.max_rationales:
            raise InputError(f"{len(chosen)} rationales, over max_rationales={cfg.max_rationales}")
        self.rationales = chosen
        details: dict[str, Any] = {"rationale_source": origin, "rationales": [r.to_dict() for r in chosen]}
        if not cfg.use_ecse or not self.texts:
            self._phase("selection", t0, f"ECSE off; {len(self.order)} candidates pass on ({origin} rationales)",
                        **details, ecse=False)
            return
        selector = MeteoraSelector(pipe.encoder, expansion_window=cfg.expansion_window,
                                   elbow_z_threshold=cfg.elbow_z_threshold)
        result = selector.select(self.texts, chosen, chunk_vectors=self.vectors)
        scores = result.scores()
        chosen_set = set(result.selected_indices)
        for i, record in enumerate(self.records):
            record.selected = i in chosen_set
            record.ecse_score = float(scores[i])
            self.priority[i] = float(scores[i])
        self.order = sorted(result.selected_indices, key=lambda i: (-scores[i], i))
        details["ecse"] = result.to_dict()["details"]
        self._phase("selection", t0, f"ECSE kept {len(self.order)} of {len(self.texts)} ({len(chosen)} {origin} rationales)",
                    **details)

    def verify(self) -> None:
        t0 = time.perf_counter()
        pipe, cfg = self.pipe, self.cfg
        outcome = run_ladder(pipe.rung, query=self.query, texts=self.texts, order=self.order, rationales=self.rationales,
                             tau=cfg.tau_relevance, query_vector=self.query_vector, vectors=self.vectors,
                             verifier=pipe.verifier, cross_encoder=pipe.cross_encoder)
        verdicts = {v.chunk_index: v for v in outcome.verdicts}
        for position, passed, score in zip(self.order, outcome.passed, outcome.scores):
            record = self.records[position]
            record.verified = passed
            record.relevance = score
            if position in verdicts:
                record.verdict = verdicts[position].to_dict()
                if verdicts[position].flagged:
                    self.flagged.add(position)
            if passed:
                self.accepted.append(position)
                if score is not None:
                    self.priority[position] = score
        threshold = cfg.tau_relevance if outcome.rung in ("cross-encoder", "cosine") else None
        self._phase("verify", t0, f"rung {outcome.rung}: {len(self.accepted)} of {len(self.order)} accepted",
                    rung=outcome.rung, tau=threshold, accepted=[self.labels[p] for p in self.accepted],
                    flagged=[self.labels[p] for p in sorted(self.flagged)])

    def fallback(self) -> None:
        t0 = time.perf_counter()
        cfg, pipe = self.cfg, self.pipe
        if cfg.n_min is None or len(self.accepted) >= cfg.n_min:
            reason = "off" if cfg.n_min is None else f"{len(self.accepted)} accepted >= n_min {cfg.n_min}"
            self._phase("fallback", t0, f"not needed ({reason})", fired=False, reason=reason)
            return
        need = cfg.n_min - len(self.accepted)
        reason = f"{len(self.accepted)} accepted < n_min {cfg.n_min}"
        taken = set(self.accepted) | self.flagged
        if pipe.index is not None:
            scope = "index"
            blocked = {self.ids[p] for p in taken}
            ids, scores = pipe.index.bm25_search(self.query, need + len(blocked))
            hits = [(int(c), float(s)) for c, s in zip(ids, scores) if int(c) not in blocked][:need]
            by_id = {self.ids[p]: p for p in range(len(self.ids))}
            new_ids = [c for c, _ in hits if c not in by_id]
            if new_ids:
                fresh = dict(zip(new_ids, pipe.index.records(new_ids)))
                self.vectors = np.concatenate([self.vectors, np.asarray(pipe.index.vectors[new_ids], dtype=np.float32)])
                for c in new_ids:
                    by_id[c] = self._add(fresh[c]["text"], fresh[c], c, fresh[c].get("id", c), None)
            positions = [(by_id[c], s) for c, s in hits]
        else:
            scope = "candidates"
            bm25 = BM25Index.build(bm25_tokens(t) for t in self.texts)
            ids, scores = bm25.search(self.query, need + len(taken))
            positions = [(int(p), float(s)) for p, s in zip(ids, scores) if int(p) not in taken][:need]
        for position, score in positions:
            record = self.records[position]
            record.via_fallback = True
            record.bm25_score = score
            self.fallback_added.append(position)
        summary = f"fired ({reason}); BM25 over the {scope} added {len(positions)}"
        if not positions:
            summary += " — BM25 found nothing new"
        self._phase("fallback", t0, summary, fired=True, reason=reason, scope=scope,
                    added=[self.labels[p] for p, _ in positions], excluded_flagged=[self.labels[p] for p in sorted(self.flagged)])

    def prioritise(self) -> None:
        t0 = time.perf_counter()
        ordered = sorted(self.accepted, key=lambda p: (-self.priority[p], p)) + self.fallback_added
        theta = self.cfg.theta_redundancy
        if theta is None:
            self.final = ordered
            self._phase("prioritise", t0, f"{len(ordered)} ordered; dedup off", theta=None)
            return
        kept, absorbed = drop_duplicates(self.vectors, ordered, theta)
        for position, (by, cosine) in absorbed.items():
            self.records[position].duplicate_of = self.labels[by]
            self.records[position].duplicate_cosine = cosine
        self.final = kept
        self._phase("prioritise", t0, f"{len(kept)} kept, {len(absorbed)} near-duplicates dropped (cosine > {theta})",
                    theta=theta, dropped={str(self.labels[p]): self.labels[b] for p, (b, _) in absorbed.items()})

    def budget(self) -> PipelineResult:
        t0 = time.perf_counter()
        cfg, counter = self.cfg, self.pipe.token_counter
        if cfg.t_max is None:
            counts = counter.count([self.texts[p] for p in self.final])
            chosen = [(p, n, self.texts[p]) for p, n in zip(self.final, counts)]
            for p, n, _ in chosen:
                self.records[p].tokens, self.records[p].budget = n, "kept"
            summary, details = f"no budget; {sum(counts)} tokens", {"t_max": None}
        else:
            decisions = pack(self.texts, self.final, cfg.t_max, counter, oversize=cfg.oversize)  # type: ignore[arg-type]
            chosen = [(d.position, d.tokens, d.text) for d in decisions if d.outcome in ("kept", "truncated")]
            for d in decisions:
                self.records[d.position].tokens, self.records[d.position].budget = d.tokens, d.outcome
            cut = next((d for d in decisions if d.outcome not in ("kept", "truncated")), None)
            used = sum(n for _, n, _ in chosen)
            summary = f"{len(chosen)} chunks, {used}/{cfg.t_max} tokens"
            if cut is not None:
                summary += f"; first cut at chunk {self.labels[cut.position]} ({cut.outcome})"
            details = {"t_max": cfg.t_max, "used": used, "oversize": cfg.oversize,
                       "cut": None if cut is None else {"chunk": self.labels[cut.position], "outcome": cut.outcome}}
        for p, _, _ in chosen:
            self.records[p].kept = True
        self._phase("budget", t0, summary, tokenizer=counter.identity, **details)
        self.trace.candidates = self.records
        return PipelineResult(
            passages=[text for _, _, text in chosen],
            documents=[self.docs[p] for p, _, _ in chosen],
            ids=[self.ids[p] for p, _, _ in chosen],
            scores=[float(self.priority.get(p, 0.0)) for p, _, _ in chosen],
            tokens=sum(n for _, n, _ in chosen),
            trace=self.trace,
        )


def _cosines(vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    if len(vectors) == 0:
        return np.zeros(0)
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1)
    norms[norms == 0] = 1.0
    return rows @ (query_vector / (np.linalg.norm(query_vector) or 1.0)) / norms
