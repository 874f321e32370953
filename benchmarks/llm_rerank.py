"""The LLM rerank's scorer two ways (one call per passage vs batched, or ask after vs ask first): ms and F1.

For each dev question the pipeline's LLM rerank (``pipeline-llm``) runs twice on one loaded
GGUF model, once with ``LlamaRelevanceScorer(batched=False)`` (one llama.cpp call per pooled
passage, the question prefix reused) and once with the batched scorer (the prefix once, every
passage in its own sequence of shared batches); which goes first alternates per question, so
a busy neighbour on a shared machine hurts both alike. Printed: the rerank's own milliseconds
per question (the relevance scores of the pool; median and p90), their ratio per question,
the evaluation's F1 of both, and how far the two scorers' numbers are apart.

With ``--compare ask-first`` the two scorers are instead the prompt layouts, both one call per
passage: the ask after the passage (``ask_first=False``, the earlier layout) and before it (the
default: the ask joins the prefix every passage shares).

    python benchmarks/llm_rerank.py [--model FILE.gguf] [--bundle ENCODER_BUNDLE] [--threads 2] [--limit 15]
                                    [--compare batched|ask-first]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header, percentile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
SETS = (("hotpotqa", DATA / "hotpotqa_distractor_dev50.json"), ("contractnli", DATA / "contractnli_dev.json"))
COMPARISONS = {  # the two scorers' names and LlamaRelevanceScorer options, old first
    "batched": (("one call per passage", {"batched": False}), ("batched", {"batched": True})),
    "ask-first": (("ask after", {"ask_first": False}), ("ask first", {"ask_first": True})),
}


class Recording:
    """A scorer that keeps each call's scores and seconds."""

    def __init__(self, scorer):
        self.scorer, self.scores, self.seconds = scorer, [], []

    def score(self, query, passages):
        started = time.perf_counter()
        out = self.scorer.score(query, passages)
        self.seconds.append(time.perf_counter() - started)
        self.scores.append(np.asarray(out))
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path,
                        default=ROOT / "models" / "bundles" / "demo-fresh" / "llm" / "qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf")
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"), help="the encoder's bundle")
    parser.add_argument("--threads", type=int, default=2, help="the GGUF model's threads")
    parser.add_argument("--context-size", type=int, default=4096)
    parser.add_argument("--limit", type=int, default=15, help="questions per dev set")
    parser.add_argument("--each", action="store_true", help="also print every question's times as it finishes")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="batched", help="which two scorers")
    args = parser.parse_args()
    paths = tuple(name for name, _ in COMPARISONS[args.compare])

    from meteora_edge import LocalLLM
    from meteora_edge.evaluation import build_method
    from meteora_edge.evaluation.datasets import load_questions
    from meteora_edge.evaluation.metrics import precision_recall_f1
    from meteora_edge.models.onnx_encoder import load_encoder
    from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer

    llm = LocalLLM.load(args.model, threads=args.threads, context_size=args.context_size)
    encoder = load_encoder(args.bundle, threads=1)
    scorers = {path: Recording(LlamaRelevanceScorer(llm, **options)) for path, options in COMPARISONS[args.compare]}
    methods = {path: build_method("pipeline-llm", encoder, scorer=scorer) for path, scorer in scorers.items()}
    print(machine_header(("numpy", "llama_cpp_python")))
    print(f"model {args.model.name}, {args.threads} thread(s), context {args.context_size}; "
          f"pipeline-llm (pool 8) on the first {args.limit} questions of each dev set: {paths[0]} (old) vs {paths[1]} (new)\n")
    rows = []
    for name, path in SETS:
        f1 = {p: [] for p in paths}
        for p in paths:
            scorers[p].seconds.clear()
            scorers[p].scores.clear()
        for number, question in enumerate(load_questions(str(path), level="sentence", limit=args.limit)):
            encoder.encode([question.question, *question.candidates])  # warm any cache, outside the timings
            order = paths if number % 2 == 0 else paths[::-1]
            for p in order:
                chosen = methods[p](question)
                f1[p].append(precision_recall_f1(chosen, question.gold).f1)
            if args.each:
                seconds = [scorers[p].seconds[-1] * 1000 for p in paths]
                print(f"  {name} question {number + 1}: {seconds[0]:.0f} ms vs {seconds[1]:.0f} ms "
                      f"({seconds[0] / seconds[1]:.2f}x), F1 {f1[paths[0]][-1]:.3f} vs {f1[paths[1]][-1]:.3f}", flush=True)
        old, new = (np.array(scorers[p].seconds) * 1000 for p in paths)
        gaps = [float(np.abs(a - b).max()) for a, b in zip(*(scorers[p].scores for p in paths)) if len(a)]
        same_top = np.mean([int(np.argmax(a) == np.argmax(b)) for a, b in zip(*(scorers[p].scores for p in paths)) if len(a)])
        rows.append((name, len(old), old, new, {p: statistics.mean(f1[p]) for p in paths}, gaps, same_top))
    print(f"{'set':<12} {'n':>3} {'old ms p50':>11} {'new ms p50':>11} {'old p90':>8} {'new p90':>8} {'speed-up':>9}"
          f" {'F1 old':>7} {'F1 new':>7} {'max |Δscore|':>13} {'same top':>9}")
    for name, n, old, new, f1, gaps, same_top in rows:
        ratio = statistics.median((old / new).tolist())
        print(f"{name:<12} {n:>3} {np.median(old):>11.0f} {np.median(new):>11.0f} {percentile(old.tolist(), 90):>8.0f} "
              f"{percentile(new.tolist(), 90):>8.0f} {ratio:>8.2f}x {f1[paths[0]]:>7.3f} {f1[paths[1]]:>7.3f} "
              f"{max(gaps):>13.3f} {same_top:>9.2f}")
    print("\nms: the relevance scores of one question's pool (8 passages); speed-up: median of the per-question ratios")


if __name__ == "__main__":
    main()
