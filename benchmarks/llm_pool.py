"""The LLM rerank's pool: how many of ECSE's candidates the model judges, against F1 and time.

The rerank (``pipeline-llm``) asks the GGUF model about each of ECSE's best ``llm_pool``
candidates (8 by default), one llama.cpp call per passage after a shared, cached prefix, so
its cost is close to linear in the passage tokens it judges. A passage's score does not
depend on the other passages of the pool, so one run that scores a pool of 10 gives the
scores of every smaller pool too: the smaller pool is a prefix of the larger one (ECSE's
selection first, then the next-best by ECSE's score).

``--record FILE`` runs ``pipeline-llm`` with a pool of 10 on the first ``--limit`` questions of
both dev sets and of their dense-gold view (``scripts/dense_gold_view.py``: the questions with
3 or more gold items, 25 candidates each) and writes, per question, the pool, ECSE's scores of
it, the model's scores, each passage's own tokens, the scorer's seconds and the live F1 (of the
pool of 10). Without ``--record``, ``--replay FILE`` reads such a file; either way the tables
replay the rerank's arithmetic (``meteora_edge.pipeline.rerank``):

* per pool size: F1, passages judged, passage tokens per question and the seconds a question
  would take (a least-squares line of the recorded seconds on the recorded tokens,
  ``a + b·tokens``);
* per cut (pool 8 or 10, ``llm_z`` 0.25 / 0.5 / 0.75): F1 and the items kept against the gold
  count, per set;
* whether the count could follow the evidence: the correlation, over a set's questions, of the
  gold count with the number of pool passages the model scores at or above a margin
  (log P(Yes) − log P(No) ≥ 0, 0.5, 1) and with the number the default cut keeps.

    python benchmarks/llm_pool.py --record /tmp/pool.json [--model FILE.gguf] [--threads 2] [--limit 50]
    python benchmarks/llm_pool.py --replay /tmp/pool.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import question_sets  # noqa: E402
from _machine import correlation, machine_header  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "models" / "bundles" / "llm15" / "llm" / "qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf"
RECORD_POOL = 10
POOLS = (2, 3, 4, 5, 6, 8, 10)
FIELDS = {"gold", "selected", "pool", "ecse", "llm", "tokens", "seconds", "live_f1"}  # a recorded question's keys
CUTS = ((8, 0.25), (8, 0.5), (8, 0.75), (10, 0.25), (10, 0.5), (10, 0.75))
MARGINS = (0.0, 0.5, 1.0)


class Recording:
    """The real scorer, keeping each call's seconds and each passage's own prompt tokens."""

    def __init__(self, scorer):
        self.scorer, self.calls = scorer, []

    def score(self, query, passages):
        from meteora_edge.selection.llm_scorer import _shared_prefix

        prompts = [self.scorer.model.chat_tokens(self.scorer.messages(query, self.scorer._clip(p))) for p in passages]
        shared = _shared_prefix(prompts) if prompts else 0
        started = time.perf_counter()
        out = self.scorer.score(query, passages)
        self.calls.append({"seconds": time.perf_counter() - started, "scores": [float(v) for v in out],
                           "tokens": [len(p) - shared for p in prompts], "prefix": shared})
        return out


def record(args) -> dict:
    from meteora_edge import LocalLLM
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.models.onnx_encoder import load_encoder
    from meteora_edge.pipeline.config import PipelineConfig
    from meteora_edge.pipeline.request import SelectRequest
    from meteora_edge.pipeline.runtime import SelectRuntime
    from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer

    llm = LocalLLM.load(args.model, threads=args.threads, context_size=4096)
    encoder = load_encoder(args.bundle, threads=1)
    scorer = Recording(LlamaRelevanceScorer(llm))
    runtime = SelectRuntime(encoder=encoder, scorer=scorer)
    settings = PipelineConfig(llm_pool=RECORD_POOL).to_dict()
    out = {"machine": machine_header(("numpy", "llama_cpp_python")), "model": Path(args.model).name,
           "threads": args.threads, "pool": RECORD_POOL, "sets": {}}
    for name, questions in question_sets(args.limit):
        rows = []
        for number, q in enumerate(questions):
            encoder.encode([q.question, *q.candidates])  # the embeddings outside the scorer's seconds
            request = SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder), settings=settings,
                                    llm_rerank=True)
            result = runtime.result(request)
            phase = result.trace.phase("selection")
            by_label = {c.chunk_id: c for c in result.trace.candidates}
            pool = [by_label[label] for label in phase.details["llm_rerank"]["pool"]]
            call = scorer.calls[-1]
            rows.append({"gold": sorted(q.gold), "selected": int(re.match(r"ECSE kept (\d+)", phase.summary).group(1)),
                         "pool": [int(c.chunk_id) for c in pool], "ecse": [c.ecse_score for c in pool],
                         "llm": call["scores"], "tokens": call["tokens"], "prefix": call["prefix"],
                         "words": [len(q.candidates[int(c.chunk_id)].split()) for c in pool],
                         "seconds": call["seconds"], "live_f1": precision_recall_f1(result.ids, q.gold).f1})
            print(f"  {name} {number + 1}: {call['seconds']:.2f} s, {sum(call['tokens'])} passage tokens, "
                  f"F1 {rows[-1]['live_f1']:.3f}", flush=True)
        out["sets"][name] = rows
    return out


def replay_kept(row: dict, pool: int, weight: float = 1.5, z: float = 0.5) -> tuple[list[int], int]:
    """The kept chunks and the pool size when the rerank judges the first ``pool`` of the recorded pool."""
    from meteora_edge.pipeline.rerank import rerank_cut

    n = min(len(row["pool"]), max(pool, row["selected"]))
    return [row["pool"][j] for j in rerank_cut(np.array(row["ecse"][:n]), np.array(row["llm"][:n]), weight=weight, z=z)], n


def replay_order(row: dict, pool: int = 8, weight: float = 1.5) -> list[int]:
    """The first ``pool`` of the recorded pool (at least ECSE's selection), best first by the rerank's combined score."""
    from meteora_edge.pipeline.rerank import combined_scores

    n = min(len(row["pool"]), max(pool, row["selected"]))
    combined = combined_scores(np.array(row["ecse"][:n]), np.array(row["llm"][:n]), weight=weight)
    return [row["pool"][j] for j in np.lexsort((np.arange(n), -combined))]


def replay_f1(row: dict, pool: int, weight: float = 1.5, z: float = 0.5) -> tuple[float, int, int]:
    """F1, pool size and passage tokens when the rerank judges the first ``pool`` of the recorded pool."""
    from meteora_edge.evaluation.metrics import precision_recall_f1

    kept, n = replay_kept(row, pool, weight, z)
    return precision_recall_f1(kept, frozenset(row["gold"])).f1, n, sum(row["tokens"][:n])


def words_kept(row: dict, kept: list[int]) -> int:
    """Whitespace words of the kept pool passages (a recording with per-passage ``words``)."""
    return sum(row["words"][row["pool"].index(c)] for c in kept)


def cut_table(data: dict) -> None:
    """F1 and items kept (and words, in a recording that has them) per cut, and whether any count follows the gold
    count. The cuts: each of ``CUTS``, then ``ECSE n``: as many as ECSE selected, the best by the combined score."""
    from meteora_edge.evaluation.metrics import precision_recall_f1

    names = list(data["sets"])
    with_words = all("words" in r for rows in data["sets"].values() for r in rows)
    cuts = [(str(pool), str(z), lambda r, pool=pool, z=z: replay_kept(r, pool, z=z)[0]) for pool, z in CUTS]
    cuts.append(("8", "ECSE n", lambda r: replay_order(r)[: r["selected"]]))
    print(f"F1 / items kept{' / words' if with_words else ''} per rerank cut (weight 1.5); gold per question: "
          + ", ".join(f"{name} {statistics.mean(len(r['gold']) for r in data['sets'][name]):.2f}" for name in names))
    print(f"{'pool':>4} {'llm_z':>6} " + " ".join(f"{name:>22}" for name in names))
    for pool, z, keep in cuts:
        cells = []
        for name in names:
            rows = data["sets"][name]
            kept = [keep(r) for r in rows]
            f1 = statistics.mean(precision_recall_f1(k, frozenset(r["gold"])).f1 for k, r in zip(kept, rows))
            words = f" / {statistics.mean(words_kept(r, k) for k, r in zip(kept, rows)):.0f}" if with_words else ""
            cells.append(f"{f1:.3f} / {statistics.mean(len(k) for k in kept):.2f}{words}")
        print(f"{pool:>4} {z:>6} " + " ".join(f"{c:>22}" for c in cells))
    print(f"\nr(gold count, count): the default cut's kept; pool passages (of {data.get('pool', 8)}) the model "
          "scores >= a margin")
    print(f"{'set':<12} {'kept':>6} " + " ".join(f"{'>= ' + str(m):>7}" for m in MARGINS)
          + "   median score: gold / other pool passages")
    for name in names:
        rows = data["sets"][name]
        gold = [len(r["gold"]) for r in rows]
        kept = [len(replay_kept(r, 8)[0]) for r in rows]
        above = [correlation(gold, [sum(v >= m for v in r["llm"]) for r in rows]) for m in MARGINS]
        scores = {True: [], False: []}
        for r in rows:
            for chunk, value in zip(r["pool"], r["llm"]):
                scores[chunk in r["gold"]].append(value)
        medians = " / ".join(f"{np.median(scores[g]):+.2f}" if scores[g] else "-" for g in (True, False))
        print(f"{name:<12} {correlation(gold, kept):>6} " + " ".join(f"{a:>7}" for a in above) + f"   {medians}")


def table(data: dict) -> None:
    print(data["machine"])
    print(f"model {data['model']}, {data['threads']} thread(s); LLM rerank weight 1.5, z 0.5 replayed per pool size; "
          f"live F1 of the pool of {data.get('pool', 8)}\n")
    print(f"{'set':<12} {'n':>4} {'pool':>6} {'judged':>7} {'tokens/q':>9} {'est s/q':>8} {'F1':>7} {'ΔF1 vs 8':>9}")
    for name, rows in data["sets"].items():
        tokens = np.array([sum(r["tokens"]) for r in rows], dtype=float)
        seconds = np.array([r["seconds"] for r in rows])
        slope, intercept = np.polyfit(tokens, seconds, 1)
        full = statistics.mean(replay_f1(r, 8)[0] for r in rows)
        live = statistics.mean(r["live_f1"] for r in rows)
        replayed = statistics.mean(replay_f1(r, data.get("pool", 8))[0] for r in rows)
        for pool in POOLS:
            runs = [replay_f1(r, pool) for r in rows]
            f1 = statistics.mean(f for f, _, _ in runs)
            judged = statistics.mean(n for _, n, _ in runs)
            per_q = statistics.mean(t for _, _, t in runs)
            print(f"{name:<12} {len(rows):>4} {pool:>6} {judged:>7.2f} {per_q:>9.0f} {intercept + slope * per_q:>8.2f} "
                  f"{f1:>7.3f} {f1 - full:>+9.3f}")
        print(f"{name:<12} measured pool {data.get('pool', 8)}: median {np.median(seconds):.2f} s/question, "
              f"{np.median(tokens / seconds):.0f} passage tokens/s; live F1 {live:.3f} (replayed {replayed:.3f}); "
              f"fit {intercept:.2f} s + {slope * 1000:.2f} ms/token\n")


def read_recording(parser, path: Path, what: str, fields: set[str]) -> dict:
    """A recording, or one line on the parser: unreadable, or a question without one of ``fields``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        parser.error(f"cannot read {what} {path}: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("sets"), dict) or not data["sets"]:
        parser.error(f"{path} is not {what} (no 'sets')")
    for rows in data["sets"].values():
        if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) and fields <= r.keys() for r in rows):
            parser.error(f"{path} is not {what} (each question needs {sorted(fields)})")
    return data


def main() -> None:
    from meteora_edge.fileio import write_text_atomic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"), help="the encoder's bundle")
    parser.add_argument("--threads", type=int, default=2, help="the GGUF model's threads")
    parser.add_argument("--limit", type=int, default=50, help="questions per dev set")
    parser.add_argument("--record", type=Path, help="run the model and write the recorded pools here")
    parser.add_argument("--replay", type=Path, help="replay a recorded file instead of running the model")
    args = parser.parse_args()
    if args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.record:
        data = record(args)
        write_text_atomic(args.record, json.dumps(data))
    elif args.replay:
        data = read_recording(parser, args.replay, "a recording of this script", FIELDS)
    else:
        parser.error("give --record FILE or --replay FILE")
    table(data)
    cut_table(data)


if __name__ == "__main__":
    main()
