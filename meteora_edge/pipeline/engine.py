"""The edge pipeline: one data flow from a query to a verified, de-duplicated, budgeted context.

Phases (each recorded in the :class:`~meteora_edge.pipeline.trace.Trace`):

1. ``candidates`` — the caller's passages, or from a local index: kNN (``k_init``), and with
   hybrid or lexical scoring also BM25's ``k_init`` best, ranked by the fused score;
2. ``selection``  — rationales (given / generator / written by rule from the query) and ECSE;
   with a relevance scorer (an LLM), ECSE's best candidates are re-cut by ECSE and LLM
   scores together (:mod:`~meteora_edge.pipeline.rerank`);
3. ``verify``     — the verification ladder (LLM → cross-encoder → cosine → none), then the
   token cover: a candidate the ladder did not accept is accepted when it matches words of the
   query that no accepted chunk matches (:mod:`~meteora_edge.selection.token_cover`). Over a
   stored index, whose chunks' word-piece vectors cost a model run each, it reads at most five
   short candidates, and over long ones ECSE's term cover runs in its place (see :data:`INDEX_CANDIDATES`);
4. ``fallback``   — BM25 when fewer than ``n_min`` chunks survive; its hits are judged by the
   same rung, so nothing enters the context unverified;
5. ``prioritise`` — order by the priority score, drop chunks whose cosine to a kept one exceeds ``theta``;
6. ``budget``     — greedy packing into ``t_max`` tokens of the answer model's tokenizer.

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

import numpy as np

from ..documents import document_texts
from ..errors import ConfigError, InputError, LocalIndexError, ModelError
from ..index.corpus_index import CorpusIndex
from ..index.memory_index import InMemoryIndex
from ..models.analyzer import STOP_WORDS, Analyzer, analyzer_of
from ..models.bm25 import BM25Index
from ..models.encoders import EncoderLike, HashingEncoder, cosine_tau, embed, encoder_id
from ..models.sparse_index import SparseIndex, sparse_encoder_of
from ..selection.ecse import MeteoraSelector
from ..selection.rationales import RationaleGenerator, flag_rules, resolve_rationales, with_rules
from ..selection.token_cover import NO_WORD_PIECES, QueryCover, cover_query, has_word_pieces
from ..selection.verification import VerifierLike
from .budget import CUT_TO_FIT, PackDecision, TokenCounter, WhitespaceCounter, pack
from .config import PipelineConfig
from .ladder import CrossEncoder, choose_rung, run_ladder
from .prioritise import drop_duplicates
from .rerank import combined_scores, rerank_cut, rerank_pool
from .retrieval import cosines as _cosines, fused, index_candidates, lexical_search, resolve_lexical_scorer
from .trace import CandidateRecord, PhaseRecord, Trace

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
        run = _Run(self, query, trace, tuple(" ".join(r.split()) for r in reject), check)
        run.check()
        run.candidates(passages)
        run.check()
        run.selection(rationales)
        run.check()
        run.verify()
        run.check()
        run.fallback()
        run.check()
        run.prioritise()
        return run.budget()


class _Run:
    """The state of one pipeline run; each method is one phase."""

    def __init__(self, pipe: EvidencePipeline, query: str, trace: Trace, reject: tuple[str, ...] = (),
                 check: Callable[[], None] | None = None) -> None:
        self.pipe, self.cfg, self.query, self.trace = pipe, pipe.config, query, trace
        self._check = check
        self.reject = reject
        self.rules: tuple[str, ...] = reject
        self.texts: list[str] = []
        self.docs: list[Any] = []
        self.ids: list[int] = []
        self.labels: list[Any] = []
        self.vectors = np.zeros((0, 1), dtype=np.float32)
        self.query_vector = np.zeros(0, dtype=np.float32)
        self.records: list[CandidateRecord] = []
        self.rationales: list[Any] = []
        self.rationale_vectors: np.ndarray | None = None
        self.order: list[int] = []
        self.accepted: list[int] = []
        self.flagged: set[int] = set()
        self.errored: set[int] = set()
        self.fallback_added: list[int] = []
        self.final: list[int] = []
        self.cover: QueryCover | None = None  # the token cover's, when it ran (prioritisation asks it too)
        self.priority: dict[int, tuple[float, str]] = {}
        self._bm25: BM25Index | None = None
        self._long: bool | None = None  # see _long_candidates
        self._sparse: SparseIndex | None = None

    def check(self) -> None:
        """Stop here if the caller's check says so (see :meth:`EvidencePipeline.run`)."""
        if self._check is not None:
            self._check()

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

    def _candidate_bm25(self) -> BM25Index:
        """BM25 over the candidates, built once per run and handed to each phase that scores them
        (the candidates' lexical scores, ECSE, the fallback without an index); built again only
        when the candidates grew (an index run adds chunks retrieved for rationales)."""
        if self._bm25 is None:
            self._bm25 = BM25Index.from_texts(self.texts, analyzer=self.pipe.analyzer)
        elif self._bm25.n_docs != len(self.texts):  # candidates are only ever appended: analyse the new ones
            self._bm25 = self._bm25.extend_texts(self.texts[self._bm25.n_docs:])
        return self._bm25

    def _candidate_lexical(self) -> BM25Index | SparseIndex:
        """The candidates' lexical index: their sparse vectors with ``lexical_scorer="sparse"``, else their BM25
        (built once per run, again only when the candidates grew)."""
        if self.pipe.lexical_scorer == "bm25":
            return self._candidate_bm25()
        if self._sparse is None or self._sparse.n_docs != len(self.texts):
            self._sparse = SparseIndex.from_texts(self.texts, encoder=self.pipe.sparse_encoder)
        return self._sparse

    def _lexical_index(self) -> BM25Index | SparseIndex | None:
        """The candidates' lexical index for ECSE when its scores have a lexical part, else None."""
        return None if self.cfg.scoring == "dense" else self._candidate_lexical()

    # -- 1. candidates -------------------------------------------------------------------

    def candidates(self, passages: Sequence[object] | None) -> None:
        t0 = time.perf_counter()
        cfg, pipe = self.cfg, self.pipe
        self.query_vector = embed(pipe.encoder, [self.query], check=self._check)[0]
        if passages is not None:
            texts = document_texts(passages)
            if len(texts) > cfg.max_candidates:
                raise InputError(f"{len(texts)} passages, over max_candidates={cfg.max_candidates}; raise the limit or pre-filter")
            long = next((i for i, t in enumerate(texts) if len(t) > cfg.max_chunk_chars), None)
            if long is not None:
                raise InputError(f"passage {long} has {len(texts[long])} characters, over max_chunk_chars={cfg.max_chunk_chars}")
            vectors = (embed(pipe.encoder, texts, check=self._check) if texts
                       else np.zeros((0, self.query_vector.shape[0])))
            dense = _cosines(vectors, self.query_vector)
            for i, text in enumerate(texts):
                self._add(text, passages[i], i, i, None)
            lexical = self._candidate_lexical().text_scores(self.query) if cfg.scoring != "dense" and texts else None
            self.vectors = np.asarray(vectors, dtype=np.float32)
            source = "passages"
        elif pipe.index is not None:
            ids, dense, lexical = self._index_candidates(pipe.index)
            records = pipe.index.records(ids)
            for chunk_id, record in zip(ids, records):
                self._add(record["text"], record, int(chunk_id), record.get("id", chunk_id), None)
            self.vectors = np.asarray(pipe.index.vectors_for(ids), dtype=np.float32) if ids else np.zeros(
                (0, self.query_vector.shape[0]), dtype=np.float32)
            source = "knn" if cfg.scoring == "dense" else f"knn+{pipe.lexical_scorer}"
        else:
            raise InputError("no candidates: pass passages=… or build the pipeline with an index")
        retrieval = self._fuse(dense, lexical)
        for i, record in enumerate(self.records):
            record.retrieval_score = float(retrieval[i])
            record.dense_score = float(dense[i])
            record.lexical_score = None if lexical is None else float(lexical[i])
            self.priority[i] = (record.retrieval_score, "retrieval")
        self.order = list(range(len(self.texts)))
        self._phase("candidates", t0, f"{len(self.texts)} candidates from {source} ({cfg.scoring} scores)", source=source,
                    k_init=cfg.k_init if source != "passages" else None, scoring=cfg.scoring)

    def _index_candidates(self, index: CorpusIndex) -> tuple[list[int], np.ndarray, np.ndarray | None]:
        """kNN's best (and BM25's best unless scoring is dense), ranked by the fused score, best first."""
        return index_candidates(index, self.query, self.query_vector, self.cfg.k_init, scoring=self.cfg.scoring,
                                lexical_weight=self.cfg.lexical_weight, lexical_scorer=self.pipe.lexical_scorer,
                                sparse_encoder=self.pipe.sparse_encoder)

    def _fuse(self, dense: np.ndarray, lexical: np.ndarray | None) -> np.ndarray:
        return fused(dense, lexical, scoring=self.cfg.scoring, lexical_weight=self.cfg.lexical_weight)

    # -- 2. selection --------------------------------------------------------------------

    def selection(self, rationales: object | None) -> None:
        t0 = time.perf_counter()
        pipe, cfg = self.pipe, self.cfg
        generator = pipe.rationale_generator
        combine = rationales is None and generator is not None and cfg.rationales == "llm+auto"
        auto = rationales is None and (combine or (generator is None and cfg.rationales in ("auto", "llm+auto")))
        if combine:  # the model's rationales join the rule-written ones; none written leaves the rule's alone
            chosen, source = resolve_rationales(self.query, None, generator, fallback_to_query=True,
                                                documents=self.texts)
            chosen, origin = (chosen if source == "generated" else []), "llm+auto"
        elif auto:
            chosen, origin = [], "auto"
        else:
            chosen, origin = resolve_rationales(self.query, rationales, generator, fallback_to_query=True,
                                                documents=self.texts)
        if len(chosen) > cfg.max_rationales:
            raise InputError(f"{len(chosen)} rationales, over max_rationales={cfg.max_rationales}")
        if not cfg.use_ecse or not self.texts:
            if auto:
                from ..selection.auto_rationales import question_rationales

                chosen = question_rationales(self.query)[0] + list(chosen)
            self.rules = tuple(dict.fromkeys([*flag_rules(chosen), *self.reject]))
            self.rationales = with_rules(chosen, self.reject)
            self._phase("selection", t0, f"ECSE off; {len(self.order)} candidates pass on ({origin} rationales)",
                        rationale_source=origin, rationales=[r.to_dict() for r in self.rationales], ecse=False)
            return
        # one cover of the question's words: the token cover after verification where it can run, else ECSE's term cover
        cover_blocked = self._token_cover_blocked() or (None if has_word_pieces(pipe.encoder) else NO_WORD_PIECES)
        selector = MeteoraSelector(pipe.encoder, expansion_window=cfg.expansion_window,
                                   elbow_z_threshold=cfg.elbow_z_threshold, scoring=cfg.scoring,
                                   lexical_weight=cfg.lexical_weight, pooled_cut=cfg.pooled_cut, pooled_z=cfg.pooled_z,
                                   pooled_gap=cfg.pooled_gap, cover_z=cfg.cover_z if cover_blocked else None,
                                   cover_lead=cfg.cover_lead, robust_z=cfg.robust_z, top_band=cfg.top_band,
                                   pairing_band=cfg.pairing_band, analyzer=pipe.analyzer,
                                   sparse_encoder=pipe.sparse_encoder if pipe.lexical_scorer == "sparse" else None)
        if auto:
            plan = selector.plan_auto(self.texts, self.query, chunk_vectors=self.vectors,
                                      lexical_index=self._lexical_index())
            if chosen:  # llm+auto: the generated rationales join the rule-written ones
                plan = plan.extended(chosen)
            if pipe.index is not None:
                for rationale in plan.rationales:
                    if rationale.label != "question":
                        self._retrieve_for(pipe.index, rationale)
            result = selector.select(self.texts, plan.rationales, chunk_vectors=self.vectors, plan=plan,
                                     lexical_index=self._lexical_index())
        else:
            result = selector.select(self.texts, chosen, chunk_vectors=self.vectors,
                                     lexical_index=self._lexical_index())
        # the rerank lists every rule apart; the verifier reads the user's merged into the first rationale's
        self.rules = tuple(dict.fromkeys([*flag_rules(result.rationales), *self.reject]))
        self.rationales, self.rationale_vectors = with_rules(result.rationales, self.reject), result.rationale_vectors
        if len(self.rationales) > cfg.max_rationales:
            raise InputError(f"{len(self.rationales)} rationales, over max_rationales={cfg.max_rationales}")
        scores = result.scores()
        chosen_by = result.chosen_by()
        for i, record in enumerate(self.records):
            record.selected = i in chosen_by
            record.chosen_by = chosen_by.get(i)
            record.ecse_score = float(scores[i])
            self.priority[i] = (float(scores[i]), "selection")
        self.order = sorted(result.selected_indices, key=lambda i: (-scores[i], i))
        term_cover = ("off" if cfg.cover_z is None else f"on: {cover_blocked}" if cover_blocked
                      else "left to the token cover, which runs after verification")
        details = {"rationale_source": origin, "rationales": [r.to_dict() for r in self.rationales],
                   "term_cover": term_cover, "ecse": result.to_dict()["details"]}
        summary = (f"ECSE kept {len(self.order)} of {len(self.texts)} ({len(self.rationales)} {origin} rationales, "
                   f"{cfg.scoring} scores)")
        if pipe.relevance_scorer is not None and cfg.llm_pool is not None:
            details["llm_rerank"] = self._llm_rerank(scores)
            summary += f"; LLM rerank of {len(details['llm_rerank']['pool'])} kept {len(self.order)}"
        self._phase("selection", t0, summary, **details)

    def _llm_rerank(self, scores: np.ndarray) -> dict[str, Any]:
        """Re-cut ECSE's best candidates with the relevance scorer's scores (see :mod:`.rerank`)."""
        cfg, scorer = self.cfg, self.pipe.relevance_scorer
        assert scorer is not None and cfg.llm_pool is not None
        pool = rerank_pool(scores, selected=self.order, pool=cfg.llm_pool)
        rules = self.rules
        applied = bool(rules) and bool(getattr(scorer, "reads_rules", False))
        passages = [self.texts[p] for p in pool]
        raw = scorer.score(self.query, passages, rules=rules) if applied else scorer.score(self.query, passages)
        llm = np.asarray(raw, dtype=np.float64).reshape(-1)
        if llm.shape[0] != len(pool) or not np.isfinite(llm).all():
            raise ModelError(f"the relevance scorer returned {llm.shape[0]} scores for {len(pool)} passages, or non-finite values")
        ecse = np.asarray([scores[p] for p in pool], dtype=np.float64)
        combined = combined_scores(ecse, llm, weight=cfg.llm_weight)
        kept = [pool[j] for j in rerank_cut(ecse, llm, weight=cfg.llm_weight, z=cfg.llm_z)]
        for j, position in enumerate(pool):
            record = self.records[position]
            record.llm_score = float(llm[j])
            record.selected = position in kept
            record.chosen_by = "llm rerank" if record.selected else None
            self.priority[position] = (float(combined[j]), "llm-rerank")
        for position in set(self.order) - set(kept):
            self.records[position].selected, self.records[position].chosen_by = False, None
        self.order = kept
        return {"pool": [self.labels[p] for p in pool], "kept": [self.labels[p] for p in kept],
                "weight": cfg.llm_weight, "z": cfg.llm_z, "rules": list(rules), "rules_applied": applied}

    def _retrieve_for(self, index: CorpusIndex, rationale: Any) -> None:
        """Fetch the index's best chunks for one rule-written rationale into the candidates.

        A compared name's evidence or a second hop's bridge evidence shares little with the
        question as a whole, so kNN for the question often misses it; such a rationale
        retrieves for itself (kNN and, unless scoring is dense, BM25; ``k_init`` each). ECSE, which
        runs next over all the candidates, gives the fetched ones their priority.
        """
        text = rationale.text
        vector = embed(self.pipe.encoder, [text], check=self._check)[0]
        found = [int(c) for c in index.search(vector, self.cfg.k_init)[0]]
        if self.cfg.scoring != "dense":
            found += [int(c) for c in lexical_search(index, text, self.cfg.k_init, self.pipe.lexical_scorer,
                                                     self.pipe.sparse_encoder)[0]]
        have = set(self.ids)
        new_ids = [c for c in dict.fromkeys(found) if c not in have]
        if not new_ids:
            return
        records = index.records(new_ids)
        self.vectors = np.concatenate([self.vectors, np.asarray(index.vectors_for(new_ids), dtype=np.float32)])
        dense = _cosines(self.vectors[-len(new_ids):], self.query_vector)
        for c, record, cosine in zip(new_ids, records, dense):
            position = self._add(record["text"], record, c, record.get("id", c), None)
            self.records[position].dense_score = float(cosine)
            self.records[position].retrieved_for = f"rationale {rationale.index} ({rationale.label})"

    # -- 3. verify -----------------------------------------------------------------------

    def _judge(self, positions: list[int], rung: str) -> list[tuple[int, bool, float | None, str]]:
        """Judge ``positions`` on ``rung``; a chunk the LLM could not judge drops to the rung below.

        Returns one ``(position, passed, score, rung used)`` per position, in order.
        """
        pipe, cfg = self.pipe, self.cfg
        outcome = run_ladder(rung, query=self.query, texts=self.texts, order=positions, rationales=self.rationales,
                             tau=pipe.cross_encoder_tau if rung == "cross-encoder" else pipe.cosine_tau,
                             query_vector=self.query_vector, vectors=self.vectors,
                             verifier=pipe.verifier, cross_encoder=pipe.cross_encoder,
                             rationale_vectors=self.rationale_vectors, batch_size=cfg.verification_batch,
                             check=self._check)
        verdicts = {v.chunk_index: v for v in outcome.verdicts}
        judged = []
        keywords = self._keywords() if outcome.rung == "cosine" else frozenset()
        for position, passed, score in zip(positions, outcome.passed, outcome.scores):
            verdict = verdicts.get(position)
            record = self.records[position]
            if not passed and keywords and keywords <= set(pipe.analyzer.tokens(self.texts[position])):
                passed, used = True, KEYWORDS
                judged.append((position, passed, score, used))
                continue
            if verdict is not None:
                record.verdict = verdict.to_dict()
                if verdict.is_error:
                    self.errored.add(position)
                elif verdict.flagged:
                    self.flagged.add(position)
            judged.append((position, passed, score, outcome.rung))
        return judged

    def _keywords(self) -> frozenset[str]:
        """The query's terms when it is one or two words (a keyword search, not a question), else none.

        The cosine rung compares a chunk with the whole query; a word or two is not like any
        passage as a whole (MiniLM's cosine of "notice" to a notice clause is about 0.2), so for
        such a query a chunk holding every term of it (the analyser's: stemmed, no stop words)
        passes that rung too (``verified_by: keywords``).
        """
        if len(self.query.split()) > 2:
            return frozenset()
        return frozenset(self.pipe.analyzer.tokens(self.query))

    def verify(self) -> None:
        t0 = time.perf_counter()
        rung = self.pipe.rung
        for position, passed, score, used in self._judge(self.order, rung):
            record = self.records[position]
            record.verified, record.relevance, record.verified_by = passed, score, used
            if passed:
                self.accepted.append(position)
                if used == "cross-encoder" and score is not None:
                    self.priority[position] = (score, "cross-encoder")
        threshold = {"cross-encoder": self.pipe.cross_encoder_tau, "cosine": self.pipe.cosine_tau}.get(rung)
        summary = f"rung {rung}: {len(self.accepted)} of {len(self.order)} accepted"
        cover = self._token_cover()
        if cover.get("added"):
            summary += f"; the token cover added {len(cover['added'])}"
        self._phase("verify", t0, summary,
                    rung=rung, tau=threshold, accepted=[self.labels[p] for p in self.accepted],
                    flagged=[self.labels[p] for p in sorted(self.flagged)],
                    errors=[self.labels[p] for p in sorted(self.errored)], token_cover=cover)

    def _token_cover_blocked(self) -> str | None:
        """Why the token cover cannot run for this request, the encoder aside (None: it runs, given ECSE's
        scores, an encoder with word pieces and an accepted chunk)."""
        if self.cfg.token_cover is None:
            return "the token cover is off"
        if self.pipe.rung == "none":
            return "verification is off (every selected chunk is accepted)"
        if self.pipe.relevance_scorer is not None and self.cfg.llm_pool is not None:
            return "the LLM rerank judged the best candidates"
        if self._stored_index() and self._long_candidates():
            return INDEX_CANDIDATES
        return None

    def _stored_index(self) -> bool:
        """Whether the candidates come from a stored index (a ``LocalIndex``, a Milvus collection), whose
        chunks' word-piece vectors the token cover must compute again at each query."""
        return self.pipe.index is not None and not isinstance(self.pipe.index, InMemoryIndex)

    def _long_candidates(self) -> bool:
        """Whether the candidates' median length is over :data:`SHORT_CHUNK_PIECES` word pieces (counted
        once per run by the tokenizer alone; False for an encoder without word pieces)."""
        if self._long is None:
            pieces = getattr(self.pipe.encoder, "pieces", None)
            counts = [len(p) for p in pieces(self.texts)] if pieces is not None and self.texts else [0]
            self._long = float(np.median(counts)) > SHORT_CHUNK_PIECES
        return self._long

    def _token_cover(self) -> dict[str, Any]:
        """Accept the candidates that bring query words no accepted chunk matches (see the module doc).

        It walks ECSE's best candidates (selection score ``token_cover_z`` standard deviations above
        the mean or more) that the ladder did not accept, leaving out those a model (the LLM or the
        cross-encoder) rejected or flagged. On the cosine rung what it adds is accepted (verified by
        ``token-cover``): that rung compares the whole chunk with the whole question, which is what a
        fact answering one part of it fails. On a model's rung the model judges each addition it has
        not read yet, and only those it passes enter.
        It runs with a verification rung only (with ``none`` the selection is accepted as it is, as
        ``select --chunks`` does unless asked to verify), and not after an LLM rerank: the model has
        judged the best candidates.
        """
        cfg = self.cfg
        if cfg.token_cover is None:
            return {"min_gain": None}
        details: dict[str, Any] = {"min_gain": cfg.token_cover, "z": cfg.token_cover_z}
        blocked = self._token_cover_blocked()
        if blocked:
            return {**details, "skipped": blocked}
        if not self.records or any(r.ecse_score is None for r in self.records):
            return {**details, "skipped": "no selection scores (ECSE off)"}
        models = ("llm", "cross-encoder")
        read_by_model = {p for p, r in enumerate(self.records) if r.verified is False and r.verified_by in models}
        eligible = [p for p in range(len(self.records))
                    if p not in read_by_model and p not in self.flagged and p not in self.errored]
        stop = STOP_WORDS if self.pipe.analyzer.stop_words == "english" else frozenset()
        cover = self.cover = cover_query(self.pipe.encoder, self.query, self.texts,
                            np.array([r.ecse_score for r in self.records]), self.accepted, eligible,
                            min_gain=cfg.token_cover, z_min=cfg.token_cover_z, stop_words=stop,
                            max_walk=STORED_INDEX_WALK if self._stored_index() else None)
        if cover.skipped:
            return {**details, "skipped": cover.skipped}
        added, refused = list(zip(cover.added, cover.gains, cover.words)), []
        if self.pipe.rung in models and added:  # a model reads what it has not read yet
            verdicts = {p: (passed, score, used) for p, passed, score, used in self._judge([p for p, _, _ in added],
                                                                                          self.pipe.rung)}
            for position, (passed, score, used) in verdicts.items():
                record = self.records[position]
                record.verified, record.relevance, record.verified_by = passed, score, used
            refused = [a for a in added if not verdicts[a[0]][0]]
            added = [a for a in added if verdicts[a[0]][0]]
        for position, gain, _ in added:
            record = self.records[position]
            record.verified, record.token_gain = True, gain
            record.chosen_by = record.chosen_by or "token cover"  # a chunk ECSE chose keeps its rule
            if self.pipe.rung not in models:
                record.verified_by = "token-cover"
            self.accepted.append(position)
        return {**details, "added": [self.labels[p] for p, _, _ in added], "gains": [g for _, g, _ in added],
                "words": [w for _, _, w in added], "refused": [self.labels[p] for p, _, _ in refused]}

    # -- 4. fallback ---------------------------------------------------------------------

    def fallback(self) -> None:
        t0 = time.perf_counter()
        cfg = self.cfg
        if cfg.n_min is None or len(self.accepted) >= cfg.n_min:
            reason = "off" if cfg.n_min is None else f"{len(self.accepted)} accepted >= n_min {cfg.n_min}"
            self._phase("fallback", t0, f"not needed ({reason})", fired=False, reason=reason)
            return
        need = cfg.n_min - len(self.accepted)
        reason = f"{len(self.accepted)} accepted < n_min {cfg.n_min}"
        # accepted and flagged chunks never come back; chunks the rung rejected on content stay out too,
        # while a chunk the LLM could not judge (an error, not a flag) is judged again one rung lower
        rejected = {p for p in self.order if self.records[p].verified is False and p not in self.errored}
        blocked = set(self.accepted) | self.flagged | rejected
        excluded_flagged = [self.labels[p] for p in sorted(self.flagged)]
        hits, scope = self._bm25_hits(blocked, limit=_FALLBACK_POOL * need)
        added, refused = [], []
        lower = _rung_below(self.pipe.rung, self.pipe)
        for start in range(0, len(hits), need):
            batch = hits[start : start + need]
            again = [p for p, _ in batch if p in self.errored]
            fresh = [p for p, _ in batch if p not in self.errored]
            judged = self._judge(fresh, self.pipe.rung) if fresh else []
            retry = [p for p, passed, _, used in judged if not passed and p in self.errored]
            judged = [j for j in judged if j[0] not in retry]
            judged += self._judge(again + retry, lower) if (again or retry) else []
            bm25 = dict(batch)
            for position, passed, score, used in sorted(judged, key=lambda j: -bm25[j[0]]):
                record = self.records[position]
                record.bm25_score, record.verified_by = bm25[position], used
                if passed and len(added) < need:
                    record.via_fallback, record.verified, record.relevance = True, True, score
                    record.chosen_by = "fallback"
                    added.append(position)
                elif not passed:
                    record.verified = False
                    refused.append(position)
            if len(added) >= need:
                break
        self.fallback_added = added
        summary = f"fired ({reason}); BM25 over the {scope}: {len(added)} added, {len(refused)} refused by verification"
        if not hits:
            summary += " — BM25 found nothing new"
        self._phase("fallback", t0, summary, fired=True, reason=reason, scope=scope,
                    added=[self.labels[p] for p in added], refused=[self.labels[p] for p in refused],
                    excluded_flagged=excluded_flagged, verified_by=sorted(
                        {self.records[p].verified_by for p in added + refused if self.records[p].verified_by}))

    def _bm25_hits(self, blocked: set[int], *, limit: int) -> tuple[list[tuple[int, float]], str]:
        """BM25's best positions for the query outside ``blocked``, adding index hits as candidates."""
        pipe = self.pipe
        if pipe.index is None:
            ids, scores = self._candidate_bm25().search(self.query, limit + len(blocked))
            return [(int(p), float(s)) for p, s in zip(ids, scores) if int(p) not in blocked][:limit], "candidates"
        blocked_ids = {self.ids[p] for p in blocked}
        ids, scores = pipe.index.bm25_search(self.query, limit + len(blocked_ids))
        hits = [(int(c), float(s)) for c, s in zip(ids, scores) if int(c) not in blocked_ids][:limit]
        by_id = {self.ids[p]: p for p in range(len(self.ids))}
        new_ids = [c for c, _ in hits if c not in by_id]
        if new_ids:
            fresh = dict(zip(new_ids, pipe.index.records(new_ids)))
            self.vectors = np.concatenate([self.vectors, np.asarray(pipe.index.vectors_for(new_ids), dtype=np.float32)])
            for c in new_ids:
                by_id[c] = self._add(fresh[c]["text"], fresh[c], c, fresh[c].get("id", c), None)
        return [(by_id[c], s) for c, s in hits], "index"

    # -- 5. prioritise -------------------------------------------------------------------

    def prioritise(self) -> None:
        t0 = time.perf_counter()
        ordered = sorted(self.accepted, key=lambda p: (-self.priority[p][0], p))
        ordered += sorted(self.fallback_added, key=lambda p: (-(self.records[p].bm25_score or 0.0), p))
        for p in self.fallback_added:
            self.priority[p] = (float(self.records[p].bm25_score or 0.0), "bm25")
        for rank, p in enumerate(ordered):
            self.records[p].priority = self.priority[p][0]
            self.records[p].priority_rank = rank
        names = sorted({self.priority[p][1] for p in self.accepted})
        theta = self.cfg.theta_redundancy
        if theta is None:
            self.final = ordered
            self._phase("prioritise", t0, f"{len(ordered)} ordered by {'/'.join(names) or '-'}; dedup off",
                        theta=None, priority=names)
            return
        spared: dict[int, float] = {}
        matcher = self.cover.matcher if self.cover is not None and self.cfg.spare_new_words else None

        def brings_words(position: int, kept: list[int]) -> bool:  # the token cover's test, against the kept
            gain = matcher.gain(position, kept)  # type: ignore[union-attr]
            if gain >= self.cfg.token_cover:  # type: ignore[operator]
                spared[position] = round(gain, 6)
            return position in spared

        kept, absorbed = drop_duplicates(self.vectors, ordered, theta, spare=brings_words if matcher else None)
        for position, (by, cosine) in absorbed.items():
            self.records[position].duplicate_of = self.labels[by]
            self.records[position].duplicate_cosine = cosine
        self.final = kept
        summary = (f"{len(kept)} kept by {'/'.join(names) or '-'} score, {len(absorbed)} near-duplicates dropped "
                   f"(cosine > {theta})")
        if spared:
            summary += f", {len(spared)} kept for question words the others do not match"
        self._phase("prioritise", t0, summary, theta=theta, priority=names,
                    dropped={str(self.labels[p]): self.labels[b] for p, (b, _) in absorbed.items()},
                    **({"spared": {str(self.labels[p]): g for p, g in spared.items()}} if matcher else {}))

    # -- 6. budget -----------------------------------------------------------------------

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
            chosen = [(d.position, d.tokens, d.text) for d in decisions if d.kept]
            for d in decisions:
                self.records[d.position].tokens, self.records[d.position].budget = d.tokens, d.outcome
            cut = next((d for d in decisions if not d.kept), None)
            used = sum(n for _, n, _ in chosen)
            summary = f"{len(chosen)} chunks, {used}/{cfg.t_max} tokens"
            note = _cut_to_fit_note(decisions, self.labels, self.texts, counter, cfg.t_max)
            if note is not None:
                summary += f"; {note}"
            if cut is not None:
                summary += f"; first cut at chunk {self.labels[cut.position]} ({cut.outcome})"
            details = {"t_max": cfg.t_max, "used": used, "oversize": cfg.oversize,
                       "cut": None if cut is None else {"chunk": self.labels[cut.position], "outcome": cut.outcome}}
            if note is not None:
                details["note"] = note
        for p, _, _ in chosen:
            self.records[p].kept = True
        self._phase("budget", t0, summary, tokenizer=counter.identity, **details)
        self.trace.candidates = self.records
        return PipelineResult(
            passages=[text for _, _, text in chosen],
            documents=[self.docs[p] for p, _, _ in chosen],
            ids=[self.ids[p] for p, _, _ in chosen],
            scores=[float(self.priority[p][0]) for p, _, _ in chosen],
            tokens=sum(n for _, n, _ in chosen),
            trace=self.trace,
            score_names=[self.priority[p][1] for p, _, _ in chosen],
        )


def _cut_to_fit_note(decisions: Sequence[PackDecision], labels: Sequence[Any], texts: Sequence[str],
                     counter: TokenCounter, t_max: int) -> str | None:
    """The trace's note when the budget cut its first chunk because no chunk fitted whole (else None)."""
    first = next((d for d in decisions if d.outcome == CUT_TO_FIT), None)
    if first is None:
        return None
    whole = counter.count([texts[first.position]])[0]
    return (f"every chunk is larger than t_max {t_max}: chunk {labels[first.position]} ({whole} tokens) was cut to "
            f"{first.tokens} tokens so the context is not empty; raise t_max or index with a smaller chunk_size")


#: How a chunk passed the cosine rung when it holds every term of a one- or two-word query (see ``_Run._keywords``).
KEYWORDS = "keywords"
#: Why the token cover leaves long candidates of a stored index (a ``LocalIndex``, a Milvus collection) to ECSE's
#: term cover: the index stores each chunk's pooled vector, not its word pieces' vectors, so the encoder runs again
#: on every chunk the cover reads, at each query: a few milliseconds for a sentence, tens for a 200-word chunk
#: (seconds over a walk of such chunks, where a select otherwise takes about 0.1 s). Over short candidates
#: (sentences, facts: a median of :data:`SHORT_CHUNK_PIECES` word pieces or fewer) the token cover runs, its walk
#: cut to :data:`STORED_INDEX_WALK` chunks. An ``InMemoryIndex`` embedded its texts in this process, and the
#: encoder keeps their pieces' vectors from that pass, as it does for passages given to :meth:`EvidencePipeline.run`.
INDEX_CANDIDATES = "the candidates are long chunks of a stored index (their word-piece vectors are not stored)"
#: Candidates of a stored index at most this long (median word pieces) keep the token cover.
SHORT_CHUNK_PIECES = 64
#: Over a stored index, the token cover reads at most this many candidates beyond the accepted ones.
STORED_INDEX_WALK = 5
#: The cross-encoder rung's threshold on its probability when none is given.
CROSS_ENCODER_TAU = 0.4
_FALLBACK_POOL = 3  # the fallback judges at most this many BM25 hits per chunk it needs


def _rung_below(rung: str, pipe: EvidencePipeline) -> str:
    """The rung that judges a chunk the LLM could not judge: the cross-encoder if present, else cosine."""
    if rung != "llm":
        return rung
    return "cross-encoder" if pipe.cross_encoder is not None else "cosine"


