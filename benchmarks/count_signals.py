"""Could the number of passages kept follow the number that are relevant? What the scores say.

Issue 22 asks for a cut that keeps one passage when one stands out and five when five do. A
cut can only do that if something it sees per question moves with the gold count. This script
runs the model-free pipeline (its defaults, every candidate in its trace) over both dev sets
(HotpotQA sentences and paragraphs, ContractNLI spans) and their dense-gold view (``scripts/dense_gold_view.py``:
the questions with 3 or more gold items, 25 candidates each) and prints, per set:

* the gold count and the items the pipeline keeps, on average;
* R-precision: how many of the best |gold| candidates by the pipeline's selection score are gold
  (how good the ranking is, whatever the cut). It is also the F1 of keeping exactly |gold| of
  that ranking: the ceiling of a cut that counted the relevant passages perfectly;
* the pipeline's F1, and the F1 of keeping, per question, the prefix of that ranking with the best
  F1 (the ceiling of a cut that knew where the gold sit);
* Pearson's r, over the set's questions, between the gold count and each per-question count or
  shape a cut could use: the items kept; candidates whose standardised selection score is at
  least 1 or 1.5; candidates within 0.1 of the best cosine to the question; the lead of the
  best standardised score over the runner-up; the question's length in words.

A signal a cut could follow would show r well above 0 on every set. Where even R-precision
is close to a fixed top-K, no cut of this ranking can beat top-K by much: the ranking must improve.

Usage: python benchmarks/count_signals.py [--bundle models/bundles/default] [--limit N] [--data FILE ...]

--data runs your own evaluation files (as `meteora-edge eval` reads them) instead of the dev sets.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import question_sets, r_precision, ranked, traced_main  # noqa: E402
from _machine import correlation  # noqa: E402

SIGNALS = ("kept", "z>=1", "z>=1.5", "cos>=best-0.1", "lead", "words")


def signals(question, result) -> tuple[tuple[float, float, float], dict[str, float]]:
    """(R-precision of the selection score's ranking, the pipeline's F1, the F1 of that ranking's
    best prefix) and each signal's value, for one question."""
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.selection.stages import standardise

    candidates = result.trace.to_dict()["candidates"]
    positions = [int(c["chunk_id"]) for c in candidates]
    score = np.array([c["ecse_score"] for c in candidates], dtype=float)
    cosine = np.array([c["dense_score"] for c in candidates], dtype=float)
    z = standardise(score)
    top = np.sort(z)[::-1]
    values = {"kept": len(result.ids), "z>=1": int((z >= 1).sum()), "z>=1.5": int((z >= 1.5).sum()),
              "cos>=best-0.1": int((cosine >= cosine.max() - 0.1).sum()),
              "lead": float(top[0] - top[1]) if len(top) > 1 else 0.0, "words": len(question.question.split())}
    order = ranked(score, positions)
    hits = np.cumsum([p in question.gold for p in order])  # F1 of the best k: 2 · hits / (k + |gold|)
    best_prefix = float(np.max(2 * hits / (np.arange(1, len(order) + 1) + len(question.gold)), initial=0.0))
    return (r_precision(order, question.gold), precision_recall_f1([int(i) for i in result.ids], question.gold).f1,
            best_prefix), values


def main() -> None:
    traced_main(__doc__, "the pipeline's defaults (model-free), every candidate traced",
                f"{'':<52}Pearson's r of the gold count with each signal\n"
                f"{'set':<13} {'n':>3} {'gold':>5} {'kept':>5} {'R-prec':>7} {'F1':>6} {'best cut':>8} " + " ".join(f"{s:>13}" for s in SIGNALS), report)


def report(runtime, encoder, limit: int | None, data: tuple[str, ...] = ()) -> None:
    """One row per set (see the module docstring)."""
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.pipeline.request import SelectRequest

    for name, questions in question_sets(limit, paragraphs=True, data=data):
        ranking, table = [], {s: [] for s in SIGNALS}
        for q in questions:
            result = runtime.result(SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder),
                                                  detail="full"))
            of_ranking, values = signals(q, result)
            ranking.append(of_ranking)
            for s in SIGNALS:
                table[s].append(values[s])
        gold = [len(q.gold) for q in questions]
        print(f"{name:<13} {len(questions):>3} {statistics.mean(gold):>5.2f} {statistics.mean(table['kept']):>5.2f} "
              f"{' '.join(f'{v:>{w}.3f}' for v, w in zip(np.mean(ranking, axis=0), (7, 6, 8)))} " + " ".join(f"{correlation(gold, table[s]):>13}"
                                                                      for s in SIGNALS))


if __name__ == "__main__":
    main()
