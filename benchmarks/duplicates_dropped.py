"""What prioritisation's near-duplicate test drops: gold or not, with and without sparing new words.

Prioritisation drops a chunk whose cosine to a chunk kept before it exceeds ``theta_redundancy``
(0.85). This script runs the model-free pipeline over both dev sets (HotpotQA sentences,
ContractNLI spans) and their dense-gold view (``scripts/dense_gold_view.py``: the questions with
3 or more gold items, 25 candidates each), once with its defaults and once with
``spare_new_words`` off (every chunk above the threshold dropped, the default before session
15), and counts, over each set's questions, the accepted chunks the test dropped (gold / not
gold), the chunks it spared for the question words they bring (gold / not gold), and the F1.

Usage: python benchmarks/duplicates_dropped.py [--bundle models/bundles/default] [--limit N] [--data FILE ...]

--data runs your own evaluation files (as `meteora-edge eval` reads them) instead of the dev sets.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import question_sets, traced_main  # noqa: E402

RUNS = (("defaults", {}), ("spare off", {"spare_new_words": False}))


def main() -> None:
    traced_main(__doc__, "the pipeline's defaults (model-free), theta_redundancy 0.85",
                f"{'set':<12} {'run':<10} {'n':>4} {'dropped gold/other':>19} {'spared gold/other':>18} {'kept':>6} {'F1':>6}", report)


def report(runtime, encoder, limit: int | None, data: tuple[str, ...] = ()) -> None:
    """One row per set and run (see the module docstring)."""
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.pipeline.request import SelectRequest

    for name, questions in question_sets(limit, data=data):
        for label, settings in RUNS:
            dropped, spared, kept, f1 = [0, 0], [0, 0], [], []
            for q in questions:
                result = runtime.result(SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder),
                                                      settings=settings))
                phase = next(p for p in result.trace.phases if p.name == "prioritise")
                position = {str(c.chunk_id): int(c.chunk_id) for c in result.trace.candidates}  # labels are chunk ids
                for key in phase.details.get("dropped", {}):
                    dropped[position[key] not in q.gold] += 1
                for key in phase.details.get("spared", {}):
                    spared[position[key] not in q.gold] += 1
                ids = [int(i) for i in result.ids]
                kept.append(len(ids))
                f1.append(precision_recall_f1(ids, q.gold).f1)
            print(f"{name:<12} {label:<10} {len(questions):>4} {dropped[0]:>9} / {dropped[1]:<7} {spared[0]:>8} / "
                  f"{spared[1]:<7} {statistics.mean(kept):>6.2f} {statistics.mean(f1):>6.3f}", flush=True)


if __name__ == "__main__":
    main()
