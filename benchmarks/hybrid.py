"""What hybrid scoring and rule-written rationales cost per selection, side by side in one run.

Usage: python benchmarks/hybrid.py [--bundle models/bundles/default] [--precision int8] [--questions 50]
       [--data ../shared/data/hotpotqa_distractor_dev50.json] [--repeats 3]

For every dev question, 40 of its sentences are the candidates (repeated when it has fewer).
Each selection runs the pipeline as ``select --chunks`` does (ECSE only: no verification,
fallback, de-duplication or budget) and embeds the passages itself, in one process with one
encoder thread; the configurations alternate question by question so that drift on a shared
machine hits both alike:

* ``before``  — the previous default: dense scoring, the query as the only rationale;
* ``hybrid``  — hybrid scoring, the query as the only rationale;
* ``no-cover`` — hybrid scoring and rule-written rationales, without the term cover;
* ``default`` — hybrid scoring, rule-written rationales (parts + second hop) and the term cover;
* ``verified`` — ``default`` and the cosine verification rung, without the token cover;
* ``tokens``  — ``verified`` with the token cover (``token_cover=0.05``) in place of the term cover
  (since session 18 the term cover runs only where the token cover cannot): the word-piece vectors of
  the query, the accepted chunks and the best unaccepted ones, read from the encoder's memory of the
  pass that embedded them;
* ``rerun``   — ``tokens`` with that memory off (``token_memo_bytes`` 0), as before session 15: the
  encoder runs again on those texts for their word-piece vectors.

Then the BM25 index of 40 sentences alone: build + one query, the work hybrid scoring adds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header, percentile  # noqa: E402

from meteora_edge import EvidencePipeline, PipelineConfig  # noqa: E402
from meteora_edge.evaluation import load_hotpot  # noqa: E402
from meteora_edge.models.bm25 import BM25Index, bm25_tokens  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "before": PipelineConfig(scoring="dense", rationales="query", n_min=None, theta_redundancy=None, t_max=None,
                             verification="none"),
    "hybrid": PipelineConfig(scoring="hybrid", rationales="query", n_min=None, theta_redundancy=None, t_max=None,
                             verification="none"),
    "no-cover": PipelineConfig(n_min=None, theta_redundancy=None, t_max=None, verification="none", cover_z=None),
    "default": PipelineConfig(n_min=None, theta_redundancy=None, t_max=None, verification="none"),
    "verified": PipelineConfig(n_min=None, theta_redundancy=None, t_max=None, verification="cosine", token_cover=None),
    "tokens": PipelineConfig(n_min=None, theta_redundancy=None, t_max=None, verification="cosine", token_cover=0.05),
}


def forty(candidates: list[str]) -> list[str]:
    return [candidates[i % len(candidates)] for i in range(40)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--precision", default="int8")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "hotpotqa_distractor_dev50.json"))
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(machine_header(("numpy", "onnxruntime")))
    from meteora_edge import OnnxEncoder
    from meteora_edge.models.token_memo import TokenMemo

    encoder = OnnxEncoder.from_bundle(args.bundle, precision=args.precision, threads=1)
    print(f"encoder: {encoder.identity}, 1 thread; 40 candidates per question, {args.questions} questions x "
          f"{args.repeats} repeats")
    questions = load_hotpot(args.data, limit=args.questions)
    pipes = {name: EvidencePipeline(config, encoder=encoder) for name, config in CONFIGS.items()}
    forgetful = OnnxEncoder.from_bundle(args.bundle, precision=args.precision, threads=1)
    forgetful.token_memo = TokenMemo(0)
    pipes["rerun"] = EvidencePipeline(CONFIGS["tokens"], encoder=forgetful)
    for warm in ("before", "rerun"):  # warm-up: both encoders
        pipes[warm].run(questions[0].question, passages=forty(questions[0].candidates))
    times: dict[str, list[float]] = {name: [] for name in pipes}
    for _ in range(args.repeats):
        for q in questions:
            passages = forty(q.candidates)
            for name, pipe in pipes.items():
                t0 = time.perf_counter()
                pipe.run(q.question, passages=passages)
                times[name].append((time.perf_counter() - t0) * 1000)

    base = statistics.median(times["before"])
    print(f"\n{'configuration':<10} {'p50 ms':>8} {'p95 ms':>8} {'vs before':>10}")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(f"{name:<10} {p50:8.1f} {percentile(values, 95):8.1f} {p50 / base:9.2f}x")

    bm25 = []
    for q in questions:
        passages = forty(q.candidates)
        t0 = time.perf_counter()
        BM25Index.build(bm25_tokens(t) for t in passages).scores(bm25_tokens(q.question))
        bm25.append((time.perf_counter() - t0) * 1e6)
    print(f"\nBM25 over 40 sentences (build + one query): p50 {statistics.median(bm25):.0f} us, "
          f"p95 {percentile(bm25, 95):.0f} us")


if __name__ == "__main__":
    main()
