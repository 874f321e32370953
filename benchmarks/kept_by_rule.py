"""Which rule brought each kept chunk, and how often that chunk is gold, beside the share that pays.

The default pipeline keeps a chunk for one of several reasons: ECSE's pooled cut, a rationale's
best chunk (its pair; the rule-written second hop's pair counted apart), the term cover, the
token cover after verification, or the BM25 fallback. This script runs the model-free pipeline
(its defaults, every candidate traced) over both dev sets (HotpotQA sentences and paragraphs,
ContractNLI spans) and their dense-gold view (``scripts/dense_gold_view.py``: the questions with
3 or more gold items, 25 candidates each) and prints, per set and rule, the kept chunks it brought
that are gold / all it brought, and that share; and ``gold``, the share of all candidates that
are gold (how many of them are relevant).

A chunk is counted under the rule its trace names (``chosen_by``): the first of ECSE's pooled
cut, the second hop's pair, another rationale's pair and the term cover that holds it, else the
token cover or the fallback. So ``pooled cut`` chunks would be kept without any other rule, and
each later column is what that rule added on its own.

``pays`` is when adding a chunk helps F1. With ``h`` gold among ``k`` kept and ``g`` gold in all,
F1 = 2h / (k + g); one more chunk that is gold with chance ``p`` raises it on average exactly when
``p > h / (k + g)``, that is half the question's F1. The column is that half, averaged over the
set's questions: a rule whose share of gold lies below it costs the set F1.

Usage: python benchmarks/kept_by_rule.py [--bundle models/bundles/default] [--limit N] [--data FILE ...]

--data runs your own evaluation files (as `meteora-edge eval` reads them) instead of the dev sets.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import question_sets, traced_main  # noqa: E402

RULES = ("pooled cut", "second-hop pair", "pair", "term cover", "token cover", "fallback")


def main() -> None:
    traced_main(__doc__, "the pipeline's defaults (model-free), every candidate traced; per rule, the kept "
                "chunks it brought: gold / all (share gold)",
                f"{'set':<14} {'n':>4} {'gold':>5} {'pays':>5} {'F1':>6} " + " ".join(f"{rule:>18}" for rule in RULES),
                report)


def report(runtime, encoder, limit: int | None, data: tuple[str, ...] = ()) -> None:
    """One row per set (see the module docstring); the rule of a chunk is its trace's ``chosen_by``."""
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.pipeline.request import SelectRequest

    for name, questions in question_sets(limit, paragraphs=True, data=data):
        gold: Counter[str] = Counter()
        brought: Counter[str] = Counter()
        f1 = []
        candidates = sum(len(q.candidates) for q in questions)
        for q in questions:
            result = runtime.result(SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder),
                                                  detail="full"))
            for chunk in result.trace.candidates:
                if chunk.kept:
                    brought[chunk.chosen_by] += 1
                    gold[chunk.chosen_by] += int(chunk.chunk_id) in q.gold
            f1.append(precision_recall_f1(result.ids, q.gold).f1)
        other = set(brought) - set(RULES)
        if other:  # a rule this table has no column for (the defaults run none)
            raise SystemExit(f"kept chunks chosen by {sorted(other, key=str)}: not a column of this table")
        cells = [f"{gold[r]:>5} / {brought[r]:<5} ({gold[r] / brought[r]:.2f})" if brought[r] else f"{'-':>18}"
                 for r in RULES]
        share = sum(len(q.gold) for q in questions) / candidates
        print(f"{name:<14} {len(questions):>4} {share:>5.3f} {statistics.mean(f1) / 2:>5.2f} {statistics.mean(f1):>6.3f} "
              + " ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main()
