"""The edge pipeline: one data flow from a query to a verified, de-duplicated, budgeted context.

:meth:`EvidencePipeline.run` is six phases over one :class:`~.run_state.RunState`, each a module
of its own and each recorded in the :class:`~meteora_edge.pipeline.trace.Trace`:

1. ``candidates`` (:mod:`.phase_candidates`) — the caller's passages, or from a local index: kNN
   (``k_init``), and with hybrid or lexical scoring also BM25's ``k_init`` best, ranked by the fused score;
2. ``selection`` (:mod:`.phase_selection`) — rationales (given / generator / written by rule from
   the query) and ECSE; with a relevance scorer (an LLM), ECSE's best candidates are re-cut by
   ECSE and LLM scores together (:func:`~.rules.llm_rerank`);
3. ``verify`` (:mod:`.phase_verify`) — the verification ladder (LLM → cross-encoder → cosine →
   none), then the token cover: a candidate the ladder did not accept is accepted when it matches
   words of the query that no accepted chunk matches (:func:`~.rules.token_cover`). Over a
   stored index, whose chunks' word-piece vectors cost a model run each, it reads at most five
   short candidates, and over long ones ECSE's term cover runs in its place (see :data:`INDEX_CANDIDATES`);
4. ``fallback`` (:mod:`.phase_fallback`) — BM25 when fewer than ``n_min`` chunks survive; its hits
   are judged by the same rung, so nothing enters the context unverified;
5. ``prioritise`` (:mod:`.phase_prioritise`) — order by the priority score, drop chunks whose
   cosine to a kept one exceeds ``theta``;
6. ``budget`` (:mod:`.phase_budget`) — greedy packing into ``t_max`` tokens of the answer model's tokenizer.

**Scores.** Every phase keeps its own named score per chunk in the trace (``retrieval``,
``dense``, ``lexical``, ``selection``, ``relevance``, ``bm25``). Prioritisation sorts the
verified chunks by one documented score, the *priority*: the cross-encoder's probability when
that rung judged them, else the selection (ECSE) score, else the retrieval score; fallback
hits follow in BM25 order. ``PipelineResult.scores`` holds each passage's priority score and
``PipelineResult.score_names`` says which score it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, InputError, LocalIndexError
from ..index.corpus_index import CorpusIndex
from ..models.analyzer import Analyzer, analyzer_of
from ..models.encoders import EncoderLike, HashingEncoder, cosine_tau, encoder_id
from ..models.sparse_index import sparse_encoder_of
from ..selection.rationales import RationaleGenerator
from ..selection.verification import VerifierLike
from .budget import TokenCounter, WhitespaceCounter
from .config import PipelineConfig
from .judge import KEYWORDS  # noqa: F401 (re-exported, as are the rules' constants below)
from .ladder import CrossEncoder, choose_rung
from .phase_budget import budget
from .phase_candidates import candidates
from .phase_fallback import fallback
from .phase_prioritise import prioritise
from .phase_selection import selection
from .phase_verify import verify
from .retrieval import resolve_lexical_scorer
from .rules import INDEX_CANDIDATES, SHORT_CHUNK_PIECES, STORED_INDEX_WALK  # noqa: F401
from .run_state import RunState, Step
from .trace import PhaseRecord, Trace

__all__ = ["PipelineConfig", "EvidencePipeline", "PipelineResult"]


@dataclass(frozen=True)
class PipelineResult:
    """The budgeted context: passages in priority order, their ids, scores and the trace.

    ``scores[i]`` is passage ``i``'s priority score and ``score_names[i]`` names it
    (``cross-encoder``, ``selection``, ``retrieval`` or ``bm25`` for a fallback hit).
    """

    passages: list[str]
    documents: list[Any]
    ids: list[int]
    scores: list[float]
    tokens: int
    trace: Trace = field(repr=False)
    score_names: list[str] = field(default_factory=list)

    @property
    def context(self) -> str:
        return "\n\n".join(self.passages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passages": list(self.passages),
            "ids": list(self.ids),
            "scores": [round(s, 6) for s in self.scores],
            "score_names": list(self.score_names),
            "tokens": self.tokens,
            "trace": self.trace.to_dict(),
        }


class EvidencePipeline:
    """METEORA selection and MeVe's phases as one pipeline.

    Args:
        config: phase settings.
        encoder: embeds queries, rationales and passages (defaults to :class:`HashingEncoder`;
            with an index it must be the index's encoder).
        index: a :class:`~meteora_edge.index.corpus_index.CorpusIndex` to retrieve from — a
            ``LocalIndex``, ``InMemoryIndex`` or ``MilvusIndex`` (else pass ``passages`` to :meth:`run`).
        rationale_generator: e.g. a ``LlamaRationaleGenerator``.
        verifier: e.g. a ``LlamaVerifier`` (the top rung of the ladder).
        cross_encoder: any object with ``score(query, passages)`` (the second rung).
        token_counter: the answer model's tokenizer (default: whitespace words).
        relevance_scorer: any object with ``score(query, passages)`` returning one number per
            passage, higher for more useful (e.g. a ``LlamaRelevanceScorer``): the LLM rerank
            of ECSE's best ``config.llm_pool`` candidates.
        analyzer: the lexical analyser of every BM25 in a run (given passages, ECSE's hybrid
            score, the fallback). Default: the index's, else the encoder's (a bundle may
            record one), else ``english``. With an index it must be the index's own.
        sparse_encoder: the learned sparse encoder (SPLADE) of ``lexical_scorer="sparse"``;
            default: the one the encoder carries (a bundle with a ``sparse_encoder`` component).

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
        index: CorpusIndex | None = None,
        rationale_generator: RationaleGenerator | None = None,
        verifier: VerifierLike | None = None,
        cross_encoder: CrossEncoder | None = None,
        token_counter: TokenCounter | None = None,
        relevance_scorer: CrossEncoder | None = None,
        analyzer: Analyzer | None = None,
        sparse_encoder: object | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self.encoder = encoder if encoder is not None else HashingEncoder()
        if index is not None and encoder_id(self.encoder) != index.encoder_id:
            raise LocalIndexError(
                f"the index was built with encoder {index.encoder_id!r}, not {encoder_id(self.encoder)!r}; "
                "give the 'encoder' that built it or rebuild the index"
            )
        self.index = index
        self.rationale_generator = rationale_generator
        self.verifier = verifier
        self.cross_encoder = cross_encoder
        self.relevance_scorer = relevance_scorer
        self.token_counter = token_counter or WhitespaceCounter()
        # one analyser for every BM25 of a run: the index's (its terms were made by it), else the bundle's, else english
        self.analyzer = analyzer_of(index, self.encoder)
        if analyzer is not None:
            if not isinstance(analyzer, Analyzer):
                raise ConfigError(f"analyzer must be an Analyzer or None, got {type(analyzer).__name__}")
            if index is not None and analyzer != self.analyzer:
                raise ConfigError(f"analyzer {analyzer.name!r} is not the index's ({self.analyzer.name!r}): a query "
                                  "must be analysed as its index was; leave analyzer out or rebuild the index")
            self.analyzer = analyzer
        self.sparse_encoder = sparse_encoder if sparse_encoder is not None else sparse_encoder_of(self.encoder)
        #: what the lexical half of every hybrid score is in a run: "bm25" or "sparse" (see PipelineConfig)
        self.lexical_scorer = resolve_lexical_scorer(self.config.lexical_scorer, sparse_encoder=self.sparse_encoder,
                                                     index=index)
        self.rung = choose_rung(self.config.verification, verifier=verifier, cross_encoder=cross_encoder,
                                reranked=relevance_scorer is not None and self.config.llm_pool is not None)
        tau = self.config.tau_relevance
        judged_by_cross_encoder = self.rung == "cross-encoder" or (self.rung == "llm" and cross_encoder is not None)
        if tau is not None and judged_by_cross_encoder and not 0.0 <= tau <= 1.0:
            raise ConfigError(f"tau_relevance {tau} is outside the cross-encoder's score range [0, 1]")
        #: the cosine and cross-encoder rungs' thresholds: the one given, else each rung's calibrated one
        self.cosine_tau = cosine_tau(self.encoder) if tau is None else float(tau)
        self.cross_encoder_tau = CROSS_ENCODER_TAU if tau is None else float(tau)

    def run(
        self,
        query: str,
        *,
        passages: Sequence[object] | None = None,
        rationales: object | None = None,
        reject: Sequence[str] = (),
        check: Callable[[], None] | None = None,
    ) -> PipelineResult:
        """Run every phase for ``query``.

        Args:
            query: the question (non-empty).
            passages: candidate documents of any accepted shape; without them the index is searched.
            rationales: given rationales (text or list); else the generator, else the query.
            reject: rejection rules in plain words ("draft notes that are not part of the signed
                agreement"); they join the first rationale's flag instructions, so the LLM verifier
                flags a chunk that matches one and the LLM rerank scores it down. Without an LLM role
                they change nothing.
            check: called between the phases, the encoder's batches, the per-rationale retrievals and the
                LLM verifier's calls;
                what it raises (:class:`~meteora_edge.errors.Cancelled` from a
                :class:`~meteora_edge.pipeline.deadline.Deadline`) stops the run there.

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
                                            "tokenizer": self.token_counter.identity,
                                            "analyzer": f"{self.analyzer.name}:{self.analyzer.version}",
                                            "lexical": self.lexical_scorer if self.lexical_scorer == "bm25" else
                                            encoder_id(self.sparse_encoder)})
        if not isinstance(reject, (list, tuple)) or any(not isinstance(r, str) or not r.strip() for r in reject):
            raise InputError("reject must be a list of non-empty strings (rejection rules)")
        run = RunState(self, query, trace, tuple(" ".join(r.split()) for r in reject), check)
        run.check()
        _timed(trace, "candidates", candidates, run, passages)
        run.check()
        _timed(trace, "selection", selection, run, rationales)
        run.check()
        _timed(trace, "verify", verify, run)
        run.check()
        _timed(trace, "fallback", fallback, run)
        run.check()
        _timed(trace, "prioritise", prioritise, run)
        _timed(trace, "budget", budget, run)
        trace.candidates = run.records
        chosen = run.chosen
        return PipelineResult(
            passages=[text for _, _, text in chosen],
            documents=[run.docs[p] for p, _, _ in chosen],
            ids=[run.ids[p] for p, _, _ in chosen],
            scores=[float(run.priority[p][0]) for p, _, _ in chosen],
            tokens=sum(n for _, n, _ in chosen),
            trace=trace,
            score_names=[run.priority[p][1] for p, _, _ in chosen],
        )


def _timed(trace: Trace, name: str, phase: Callable[..., Step], *args: Any) -> None:
    """Run one phase and append its trace entry with the milliseconds it took."""
    started = time.perf_counter()
    step = phase(*args)
    trace.phases.append(PhaseRecord(name, (time.perf_counter() - started) * 1000, step.summary, step.details))


#: The cross-encoder rung's threshold on its probability when none is given.
CROSS_ENCODER_TAU = 0.4
