"""Running the methods over the questions, and the report: macro averages, tables, breakdowns and the plot."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import ConfigError
from ..fileio import atomic_path
from ..pipeline.budget import TokenCounter, WhitespaceCounter
from .datasets import EvalQuestion
from .methods import Method
from .metrics import precision_recall_f1

__all__ = ["MethodReport", "evaluate", "report_table", "BREAKDOWNS", "group_key", "breakdown", "breakdown_table",
           "require_matplotlib", "plot_report"]

_YES_NO = {"yes", "no"}


@dataclass
class MethodReport:
    method: str
    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    all_gold: float = 0.0
    items: float = 0.0
    tokens: float = 0.0
    answer_contained: float | None = None
    answer_questions: int = 0
    latency_ms_p50: float = 0.0
    latency_ms_mean: float = 0.0
    per_question: list[dict[str, Any]] = field(default_factory=list)
    retrieval: dict[str, float] | None = None

    def to_dict(self, *, with_questions: bool = False) -> dict[str, Any]:
        out = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()
               if k not in ("per_question", "retrieval")}
        if self.retrieval is not None:
            out["retrieval"] = {k: round(v, 4) for k, v in self.retrieval.items()}
        if with_questions:
            out["per_question"] = self.per_question
        return out



def evaluate(
    questions: Sequence[EvalQuestion],
    methods: dict[str, Method],
    *,
    token_counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[MethodReport]:
    """Run every method on every question (in file order) and macro-average the metrics.

    Build the methods with a warmed :class:`CachedEncoder` to keep embedding out of the
    latencies (the CLI does).
    """
    counter = token_counter or WhitespaceCounter()
    reports = []
    total = len(questions) * len(methods)
    done = 0
    for spec, method in methods.items():
        rows = []
        for q in questions:
            t0 = time.perf_counter()
            chosen = sorted(set(method(q)))
            ms = (time.perf_counter() - t0) * 1000
            metrics = precision_recall_f1(chosen, q.gold)
            text = " ".join(q.candidates[i] for i in chosen)
            answer = None if q.answer.strip().lower() in _YES_NO else q.answer.strip().lower() in text.lower()
            rows.append({
                "id": q.qid, "selected": chosen, "gold": sorted(q.gold), "precision": metrics.precision,
                "recall": metrics.recall, "f1": metrics.f1, "all_gold": q.gold <= set(chosen),
                "items": len(chosen), "tokens": sum(counter.count([q.candidates[i] for i in chosen])) if chosen else 0,
                "answer_contained": answer, "ms": ms,
            })
            done += 1
            if progress:
                progress(done, total)
        answered = [r["answer_contained"] for r in rows if r["answer_contained"] is not None]
        reports.append(MethodReport(
            method=spec,
            precision=float(np.mean([r["precision"] for r in rows])),
            recall=float(np.mean([r["recall"] for r in rows])),
            f1=float(np.mean([r["f1"] for r in rows])),
            all_gold=float(np.mean([r["all_gold"] for r in rows])),
            items=float(np.mean([r["items"] for r in rows])),
            tokens=float(np.mean([r["tokens"] for r in rows])),
            answer_contained=float(np.mean(answered)) if answered else None,
            answer_questions=len(answered),
            latency_ms_p50=float(np.median([r["ms"] for r in rows])),
            latency_ms_mean=float(np.mean([r["ms"] for r in rows])),
            per_question=rows,
        ))
    return reports


def report_table(reports: Sequence[MethodReport], *, skipped_yes_no: int | None) -> str:
    """The terminal table of a run (``skipped_yes_no=None``: no answers to check, no note on them)."""
    head = f"{'method':<28} {'P':>6} {'R':>6} {'F1':>6} {'all-gold':>8} {'items':>6} {'tokens':>7} {'answer':>7} {'ms p50':>8}"
    lines = [head, "-" * len(head)]
    for r in reports:
        answer = "-" if r.answer_contained is None else f"{r.answer_contained:.3f}"
        lines.append(
            f"{r.method:<28} {r.precision:6.3f} {r.recall:6.3f} {r.f1:6.3f} {r.all_gold:8.3f} {r.items:6.2f} "
            f"{r.tokens:7.1f} {answer:>7} {r.latency_ms_p50:8.2f}"
        )
    if skipped_yes_no is not None:
        lines.append(f"(answer containment skips {skipped_yes_no} yes/no questions)")
    return "\n".join(lines)


BREAKDOWNS = ("group", "gold-count")
_MANY_GOLD = 6  # gold counts from here on share one row


class Grouped(Protocol):
    """What a breakdown needs of a question: its gold ids and its group."""

    @property
    def gold(self) -> frozenset[Any]: ...

    @property
    def group(self) -> str | None: ...


def group_key(question: Grouped, by: str) -> str:
    """The row of a breakdown table a question falls in: its group, or its number of gold items.

    Gold counts of 6 and more share the row ``6+``; a question without a group is ``-``.

    Raises:
        ConfigError: ``by`` is not ``group`` or ``gold-count``.
    """
    if by == "group":
        return question.group or "-"
    if by == "gold-count":
        n = len(question.gold)
        return f"{_MANY_GOLD}+" if n >= _MANY_GOLD else str(n)
    raise ConfigError(f"by must be one of {list(BREAKDOWNS)}, got {by!r}")


def breakdown(questions: Sequence[Grouped], reports: Sequence[MethodReport], by: str) -> dict[str, Any]:
    """Macro-averages per group of questions, per method, from the reports of :func:`evaluate`.

    Returns:
        ``{"by": by, "groups": [{"group", "questions", "methods": {spec: {"precision", "recall",
        "f1", "all_gold", "items", "tokens"}}}]}``, groups in natural order (gold counts by number).
    """
    keys = [group_key(q, by) for q in questions]
    order = sorted(set(keys), key=lambda k: (0, int(k.rstrip("+")), k) if k.rstrip("+").isdigit() else (1, 0, k))
    groups = []
    for key in order:
        rows = [i for i, k in enumerate(keys) if k == key]
        methods = {}
        for report in reports:
            picked = [report.per_question[i] for i in rows]
            methods[report.method] = {name: round(float(np.mean([r[name] for r in picked])), 4)
                                      for name in ("precision", "recall", "f1", "all_gold", "items", "tokens")}
        groups.append({"group": key, "questions": len(rows), "methods": methods})
    return {"by": by, "groups": groups}


def breakdown_table(table: dict[str, Any]) -> str:
    """The terminal form of :func:`breakdown`: F1 per method (rows) and group (columns); by gold
    count, a second block gives the items kept, to set beside the gold count of each column."""
    groups = table["groups"]
    labels = [f"{g['group']} (n={g['questions']})" for g in groups]
    width = max(8, *(len(label) for label in labels))
    methods = list(groups[0]["methods"]) if groups else []
    blocks = [("F1", "f1", 3)] + ([("items kept", "items", 2)] if table["by"] == "gold-count" else [])
    lines: list[str] = []
    for title, key, digits in blocks:
        head = f"{title + ' by ' + table['by']:<28}" + "".join(f" {label:>{width}}" for label in labels)
        lines += ([""] if lines else []) + [head, "-" * len(head)]
        for spec in methods:
            lines.append(f"{spec:<28}" + "".join(f" {g['methods'][spec][key]:>{width}.{digits}f}" for g in groups))
    return "\n".join(lines)


def require_matplotlib() -> None:
    """Check (without importing it) that the ``plot`` extra is there, before a long evaluation.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        from ..errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot")


def plot_report(reports: Sequence[MethodReport], path: str, *, title: str) -> None:
    """F1 against mean tokens, one labelled point per method, written atomically as PNG."""
    require_matplotlib()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from ..errors import MissingExtraError

        raise MissingExtraError("matplotlib", "plot") from None
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for r in reports:
        ax.scatter(r.tokens, r.f1, s=40)
        ax.annotate(r.method, (r.tokens, r.f1), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set_xlabel("mean tokens selected per question")
    ax.set_ylabel("macro F1")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)
