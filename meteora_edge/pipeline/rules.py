"""The pipeline's own selection rules beside ECSE's: the LLM rerank and the token cover.

Each rule takes the run's state (:class:`~.run_state.RunState`), changes what it decides
(the selection's order, the accepted chunks) and returns its trace entry: the rerank's is the
selection phase's ``llm_rerank``, the token cover's the verify phase's ``token_cover``. ECSE's
rules (pairing, pooled cut, term cover, neighbours) are in
:mod:`meteora_edge.selection.ecse_rules`; the keyword pass is in :mod:`.judge`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError
from ..index.memory_index import InMemoryIndex
from ..models.analyzer import STOP_WORDS
from ..selection.token_cover import cover_query
from .judge import judge
from .rerank import combined_scores, rerank_cut, rerank_pool
from .run_state import RunState

__all__ = ["INDEX_CANDIDATES", "SHORT_CHUNK_PIECES", "STORED_INDEX_WALK", "llm_rerank", "long_candidates",
           "stored_index", "token_cover", "token_cover_blocked"]

#: Why the token cover leaves long candidates of a stored index (a ``LocalIndex``, a Milvus collection) to ECSE's
#: term cover: the index stores each chunk's pooled vector, not its word pieces' vectors, so the encoder runs again
#: on every chunk the cover reads, at each query: a few milliseconds for a sentence, tens for a 200-word chunk
#: (seconds over a walk of such chunks, where a select otherwise takes about 0.1 s). Over short candidates
#: (sentences, facts: a median of :data:`SHORT_CHUNK_PIECES` word pieces or fewer) the token cover runs, its walk
#: cut to :data:`STORED_INDEX_WALK` chunks. An ``InMemoryIndex`` embedded its texts in this process, and the
#: encoder keeps their pieces' vectors from that pass, as it does for passages given to ``EvidencePipeline.run``.
INDEX_CANDIDATES = "the candidates are long chunks of a stored index (their word-piece vectors are not stored)"
#: Candidates of a stored index at most this long (median word pieces) keep the token cover.
SHORT_CHUNK_PIECES = 64
#: Over a stored index, the token cover reads at most this many candidates beyond the accepted ones.
STORED_INDEX_WALK = 5


def llm_rerank(run: RunState, scores: np.ndarray) -> dict[str, Any]:
    """Re-cut ECSE's best candidates with the relevance scorer's scores (see :mod:`.rerank`)."""
    cfg, scorer = run.cfg, run.pipe.relevance_scorer
    assert scorer is not None and cfg.llm_pool is not None
    pool = rerank_pool(scores, selected=run.order, pool=cfg.llm_pool)
    rules = run.rules
    applied = bool(rules) and bool(getattr(scorer, "reads_rules", False))
    passages = [run.texts[p] for p in pool]
    raw = scorer.score(run.query, passages, rules=rules) if applied else scorer.score(run.query, passages)
    llm = np.asarray(raw, dtype=np.float64).reshape(-1)
    if llm.shape[0] != len(pool) or not np.isfinite(llm).all():
        raise ModelError(f"the relevance scorer returned {llm.shape[0]} scores for {len(pool)} passages, or non-finite values")
    ecse = np.asarray([scores[p] for p in pool], dtype=np.float64)
    combined = combined_scores(ecse, llm, weight=cfg.llm_weight)
    kept = [pool[j] for j in rerank_cut(ecse, llm, weight=cfg.llm_weight, z=cfg.llm_z)]
    for j, position in enumerate(pool):
        record = run.records[position]
        record.llm_score = float(llm[j])
        record.selected = position in kept
        record.chosen_by = "llm rerank" if record.selected else None
        run.priority[position] = (float(combined[j]), "llm-rerank")
    for position in set(run.order) - set(kept):
        run.records[position].selected, run.records[position].chosen_by = False, None
    run.order = kept
    return {"pool": [run.labels[p] for p in pool], "kept": [run.labels[p] for p in kept],
            "weight": cfg.llm_weight, "z": cfg.llm_z, "rules": list(rules), "rules_applied": applied}


def token_cover_blocked(run: RunState) -> str | None:
    """Why the token cover cannot run for this request, the encoder aside (None: it runs, given ECSE's
    scores, an encoder with word pieces and an accepted chunk)."""
    if run.cfg.token_cover is None:
        return "the token cover is off"
    if run.pipe.rung == "none":
        return "verification is off (every selected chunk is accepted)"
    if run.pipe.relevance_scorer is not None and run.cfg.llm_pool is not None:
        return "the LLM rerank judged the best candidates"
    if stored_index(run) and long_candidates(run):
        return INDEX_CANDIDATES
    return None


def stored_index(run: RunState) -> bool:
    """Whether the candidates come from a stored index (a ``LocalIndex``, a Milvus collection), whose
    chunks' word-piece vectors the token cover must compute again at each query."""
    return run.pipe.index is not None and not isinstance(run.pipe.index, InMemoryIndex)


def long_candidates(run: RunState) -> bool:
    """Whether the candidates' median length is over :data:`SHORT_CHUNK_PIECES` word pieces (counted
    once per run by the tokenizer alone; False for an encoder without word pieces)."""
    if run.long_candidates is None:
        pieces = getattr(run.pipe.encoder, "pieces", None)
        counts = [len(p) for p in pieces(run.texts)] if pieces is not None and run.texts else [0]
        run.long_candidates = float(np.median(counts)) > SHORT_CHUNK_PIECES
    return run.long_candidates


def token_cover(run: RunState) -> dict[str, Any]:
    """Accept the candidates that bring query words no accepted chunk matches
    (:mod:`~meteora_edge.selection.token_cover`).

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
    cfg = run.cfg
    if cfg.token_cover is None:
        return {"min_gain": None}
    details: dict[str, Any] = {"min_gain": cfg.token_cover, "z": cfg.token_cover_z}
    blocked = token_cover_blocked(run)
    if blocked:
        return {**details, "skipped": blocked}
    if not run.records or any(r.ecse_score is None for r in run.records):
        return {**details, "skipped": "no selection scores (ECSE off)"}
    models = ("llm", "cross-encoder")
    read_by_model = {p for p, r in enumerate(run.records) if r.verified is False and r.verified_by in models}
    eligible = [p for p in range(len(run.records))
                if p not in read_by_model and p not in run.flagged and p not in run.errored]
    stop = STOP_WORDS if run.pipe.analyzer.stop_words == "english" else frozenset()
    cover = run.cover = cover_query(run.pipe.encoder, run.query, run.texts,
                                    np.array([r.ecse_score for r in run.records]), run.accepted, eligible,
                                    min_gain=cfg.token_cover, z_min=cfg.token_cover_z, stop_words=stop,
                                    max_walk=STORED_INDEX_WALK if stored_index(run) else None)
    if cover.skipped:
        return {**details, "skipped": cover.skipped}
    added, refused = list(zip(cover.added, cover.gains, cover.words)), []
    if run.pipe.rung in models and added:  # a model reads what it has not read yet
        verdicts = {p: (passed, score, used) for p, passed, score, used in judge(run, [p for p, _, _ in added],
                                                                                 run.pipe.rung)}
        for position, (passed, score, used) in verdicts.items():
            record = run.records[position]
            record.verified, record.relevance, record.verified_by = passed, score, used
        refused = [a for a in added if not verdicts[a[0]][0]]
        added = [a for a in added if verdicts[a[0]][0]]
    for position, gain, _ in added:
        record = run.records[position]
        record.verified, record.token_gain = True, gain
        record.chosen_by = record.chosen_by or "token cover"  # a chunk ECSE chose keeps its rule
        if run.pipe.rung not in models:
            record.verified_by = "token-cover"
        run.accepted.append(position)
    return {**details, "added": [run.labels[p] for p, _, _ in added], "gains": [g for _, g, _ in added],
            "words": [w for _, _, w in added], "refused": [run.labels[p] for p, _, _ in refused]}
