"""What the rule-written second hop brings: the chunks it pairs that the pipeline keeps, gold or not.

Without an LLM, a question whose best chunk names a *bridge* (a name the question lacks that
other candidates mention) gets a second-hop rationale, and ECSE keeps that rationale's best chunk
(its pair). This script runs the model-free pipeline (its defaults, every candidate traced) over
both dev sets (HotpotQA sentences and paragraphs, ContractNLI spans) and their dense-gold view
(``scripts/dense_gold_view.py``: the questions with 3 or more gold items, 25 candidates each) and
prints, per set:

* how many questions got a second hop;
* the kept chunks the second hop paired, gold / not gold, split by whether the pooled cut kept
  them too (``pooled``) or only the pairing did (``pair only``: what the hop alone brought);
* of the ``pair only`` ones, those that match the question's words better than the first-hop chunk
  does by at least the token cover's minimum gain, 0.05 (its gain, ``token_cover.QueryMatcher.gain``, over the
  first hop; ONNX bundles only): would a second hop that must bring question words of its own
  keep the gold and lose the rest? (After the table: each gold pair it would lose, with its gain.)
* the F1 and the items kept of the whole pipeline;
* the bridge names used most often (the hop's rationale is the bridges plus the question's words).

Usage: python benchmarks/second_hop_pairs.py [--bundle models/bundles/default] [--limit N] [--data FILE ...]

--data runs your own evaluation files (as `meteora-edge eval` reads them) instead of the dev sets.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import question_sets, traced_main  # noqa: E402
from meteora_edge.pipeline.config import PipelineConfig  # noqa: E402
from meteora_edge.selection.auto_rationales import SECOND_HOP  # noqa: E402

GAIN = PipelineConfig().token_cover  # the token cover's own minimum gain


def main() -> None:
    traced_main(__doc__, "the pipeline's defaults (model-free), every candidate traced",
                f"{'set':<14} {'n':>4} {'hops':>5} {'pooled gold/other':>18} {'pair only gold/other':>21} {f'gain>={GAIN}':>16} {'kept':>6} {'F1':>6}"
                "  bridges used most", report)


def report(runtime, encoder, limit: int | None, data: tuple[str, ...] = ()) -> None:
    """One row per set (see the module docstring)."""
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.models.analyzer import STOP_WORDS
    from meteora_edge.pipeline.request import SelectRequest
    from meteora_edge.selection.token_cover import QueryMatcher

    lost: list[str] = []
    for name, questions in question_sets(limit, paragraphs=True, data=data):
        hops, f1, kept = 0, [], []
        pairs: Counter[tuple[str, bool]] = Counter()
        bridges: Counter[str] = Counter()
        for q in questions:
            result = runtime.result(SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder),
                                                  detail="full"))
            trace = result.trace.to_dict()
            details = next(p for p in trace["phases"] if p["name"] == "selection")["details"]
            ecse = details["ecse"]
            hop = {r["index"] for r in details["rationales"] if r["label"] == SECOND_HOP}
            if hop:
                hops += 1
                bridges.update(ecse["rationale_strategy"]["bridges"])
            candidates = {c["candidate"]: c for c in trace["candidates"]}
            matcher = None
            if hop and getattr(encoder, "token_vectors", None) is not None:  # word pieces: ONNX bundles only
                texts = [q.candidates[int(candidates[i]["chunk_id"])] for i in range(len(candidates))]
                matcher = QueryMatcher(encoder, q.question, texts, STOP_WORDS)
                first = ecse["rationale_strategy"]["first_hop"]
            for match in ecse["rationale_matches"]:
                chunk = candidates[match["chunk_index"]]
                if match["rationale_index"] in hop and chunk.get("kept"):
                    where = "pooled" if match["chunk_index"] in ecse["pooled_indices"] else "pair only"
                    gold = int(chunk["chunk_id"]) in q.gold
                    pairs[(where, gold)] += 1
                    if where == "pair only" and matcher:
                        gain = matcher.gain(match["chunk_index"], [first])
                        if gain >= GAIN:
                            pairs[("gain", gold)] += 1
                        elif gold:
                            lost.append(f"{name:<14} {gain:.3f}  {q.question[:90]} | {texts[match['chunk_index']][:90]}")
            f1.append(precision_recall_f1(result.ids, q.gold).f1)
            kept.append(len(result.ids))
        common = ", ".join(f"{b} {n}" for b, n in bridges.most_common(6))
        print(f"{name:<14} {len(questions):>4} {hops:>5} {pairs[('pooled', True)]:>9} / {pairs[('pooled', False)]:<6}"
              f" {pairs[('pair only', True)]:>11} / {pairs[('pair only', False)]:<7}"
              f" {pairs[('gain', True)]:>9} / {pairs[('gain', False)]:<5} {statistics.mean(kept):>6.2f}"
              f" {statistics.mean(f1):>6.3f}  {common}")
    if lost:
        print(f"\ngold pairs whose gain over the first hop is below {GAIN} (set, gain, question | pair):")
        print("\n".join(lost))


if __name__ == "__main__":
    main()
