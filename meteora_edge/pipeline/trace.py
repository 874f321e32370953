"""The pipeline trace: what every phase took in, gave out, and why.

``Trace.to_dict()`` is the machine form (``--json``); ``Trace.to_table()`` the readable one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Trace", "PhaseRecord", "CandidateRecord"]


@dataclass
class CandidateRecord:
    """One candidate's journey through the phases (mutable while the pipeline runs).

    Scores, one per phase: ``retrieval_score`` (the candidate ranking: fused, or cosine when
    scoring is dense) with its parts ``dense_score`` (cosine to the query) and
    ``lexical_score`` (BM25 of the query); ``ecse_score`` (selection: max of pooled and
    pairing score); ``llm_score`` (the LLM rerank's relevance margin, pooled chunks only);
    ``relevance`` (the verification rung's score, ``verified_by`` names the
    rung, or ``token-cover``); ``token_gain`` (the share of the query's words the token cover
    accepted it for); ``bm25_score`` (the fallback's); ``priority`` (what prioritisation sorted by).

    ``chosen_by`` names the rule that put the candidate forward, if one did: ECSE's ``pooled cut``,
    ``second-hop pair``, ``pair``, ``term cover`` or ``neighbour``
    (:meth:`~meteora_edge.selection.ecse.SelectionResult.chosen_by`), ``llm rerank`` (the rerank's
    cut), ``token cover`` (a candidate ECSE did not choose; one it chose and the rung rejected keeps
    ECSE's rule) or ``fallback``. None when no rule chose it, or when ECSE is off (every candidate
    goes on to verification).
    """

    candidate: int
    chunk_id: int | str
    text: str
    retrieval_score: float | None = None
    dense_score: float | None = None
    lexical_score: float | None = None
    retrieved_for: str | None = None
    selected: bool | None = None
    chosen_by: str | None = None
    ecse_score: float | None = None
    llm_score: float | None = None
    relevance: float | None = None
    verdict: dict[str, Any] | None = None
    verified: bool | None = None
    verified_by: str | None = None
    token_gain: float | None = None
    via_fallback: bool = False
    bm25_score: float | None = None
    priority: float | None = None
    priority_rank: int | None = None
    duplicate_of: int | str | None = None
    duplicate_cosine: float | None = None
    tokens: int | None = None
    budget: str | None = None
    kept: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if v is not None}
        out["text"] = self.text if len(self.text) <= 240 else self.text[:237] + "..."
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in out.items()}


@dataclass
class PhaseRecord:
    name: str
    ms: float
    summary: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ms": round(self.ms, 3), "summary": self.summary, "details": self.details}


@dataclass
class Trace:
    query: str
    config: dict[str, Any]
    phases: list[PhaseRecord] = field(default_factory=list)
    candidates: list[CandidateRecord] = field(default_factory=list)

    def phase(self, name: str) -> PhaseRecord:
        for record in self.phases:
            if record.name == name:
                return record
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "config": self.config,
            "phases": [p.to_dict() for p in self.phases],
            "candidates": [c.to_dict() for c in self.candidates],
            "total_ms": round(sum(p.ms for p in self.phases), 3),
        }

    def to_table(self, width: int = 140) -> str:
        """A terminal rendering: one line per phase, then one row per candidate."""
        lines = [f"query: {self.query}"]
        for p in self.phases:
            lines.append(f"  {p.name:<12} {p.ms:8.1f} ms  {p.summary}")
        header = (f"  {'cand':>4} {'chunk':>8} {'ret':>6} {'ecse':>6} {'chosen by':<15} {'rel':>6} {'verdict':<14} "
                  f"{'dedup':<10} {'tok':>5} {'budget':<10} text")
        lines += ["", header, "  " + "-" * (len(header) - 2)]
        for c in self.candidates:
            verdict = "-" if c.verified is None else ("accept" if c.verified else "reject")
            if c.via_fallback:
                verdict = "bm25-fallback"
            elif c.verdict and c.verdict.get("flag_types"):
                verdict += ":" + ",".join(c.verdict["flag_types"])[:7]
            dedup = "-" if c.duplicate_of is None else f"dup of {c.duplicate_of}"
            text = " ".join(c.text.split())
            room = max(10, width - len(header) + 4)
            lines.append(
                f"  {c.candidate:>4} {str(c.chunk_id):>8} {_num(c.retrieval_score)} {_num(c.ecse_score)} "
                f"{c.chosen_by or '-':<15} {_num(c.relevance)} {verdict:<14} {dedup:<10} "
                f"{c.tokens if c.tokens is not None else '-':>5} "
                f"{(c.budget or '-').split(':')[0]:<10} {'*' if c.kept else ' '}{text[:room]}"
            )
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return f"{value:6.3f}" if value is not None else f"{'-':>6}"
