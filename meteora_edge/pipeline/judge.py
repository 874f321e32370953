"""Judging candidates on a rung of the verification ladder, with the keyword pass.

:func:`judge` is how every phase that accepts a chunk asks for a verdict (verify, the token
cover, the fallback): the ladder's rung (:mod:`.ladder`), and on the cosine rung the keyword
pass (:func:`keyword_pass`) for a query of one or two words.
"""

from __future__ import annotations

from .ladder import run_ladder
from .run_state import RunState

__all__ = ["KEYWORDS", "judge", "keyword_pass", "query_keywords", "rung_below"]

#: How a chunk passed the cosine rung when it holds every term of a one- or two-word query (see :func:`keyword_pass`).
KEYWORDS = "keywords"


def judge(run: RunState, positions: list[int], rung: str) -> list[tuple[int, bool, float | None, str]]:
    """Judge ``positions`` on ``rung``; a chunk the LLM could not judge drops to the rung below.

    Returns one ``(position, passed, score, rung used)`` per position, in order; records each
    verdict and notes the chunks the LLM flagged or could not judge in ``run``.
    """
    pipe, cfg = run.pipe, run.cfg
    outcome = run_ladder(rung, query=run.query, texts=run.texts, order=positions, rationales=run.rationales,
                         tau=pipe.cross_encoder_tau if rung == "cross-encoder" else pipe.cosine_tau,
                         query_vector=run.query_vector, vectors=run.vectors,
                         verifier=pipe.verifier, cross_encoder=pipe.cross_encoder,
                         rationale_vectors=run.rationale_vectors, batch_size=cfg.verification_batch,
                         check=run.checker)
    verdicts = {v.chunk_index: v for v in outcome.verdicts}
    judged = []
    keywords = query_keywords(run) if outcome.rung == "cosine" else frozenset()
    for position, passed, score in zip(positions, outcome.passed, outcome.scores):
        verdict = verdicts.get(position)
        record = run.records[position]
        if not passed and keyword_pass(run, position, keywords):
            judged.append((position, True, score, KEYWORDS))
            continue
        if verdict is not None:
            record.verdict = verdict.to_dict()
            if verdict.is_error:
                run.errored.add(position)
            elif verdict.flagged:
                run.flagged.add(position)
        judged.append((position, passed, score, outcome.rung))
    return judged


def query_keywords(run: RunState) -> frozenset[str]:
    """The query's terms when it is one or two words (a keyword search, not a question), else none."""
    if len(run.query.split()) > 2:
        return frozenset()
    return frozenset(run.pipe.analyzer.tokens(run.query))


def keyword_pass(run: RunState, position: int, keywords: frozenset[str]) -> bool:
    """The keyword pass: a chunk the cosine rung refused passes when it holds every one of ``keywords``.

    The cosine rung compares a chunk with the whole query; a word or two is not like any
    passage as a whole (MiniLM's cosine of "notice" to a notice clause is about 0.2), so for
    such a query a chunk holding every term of it (the analyser's: stemmed, no stop words)
    passes that rung too (``verified_by: keywords``). ``keywords`` is :func:`query_keywords`.
    """
    return bool(keywords) and keywords <= set(run.pipe.analyzer.tokens(run.texts[position]))


def rung_below(rung: str, run: RunState) -> str:
    """The rung that judges a chunk the LLM could not judge: the cross-encoder if present, else cosine."""
    if rung != "llm":
        return rung
    return "cross-encoder" if run.pipe.cross_encoder is not None else "cosine"
