"""Would a token-level match from the same encoder rank the evidence better? A ranking-only test.

The pipeline ranks candidates by one pooled vector per text (cosine) and BM25. The encoder
also gives a vector per token before pooling: a question token can then find its closest token
in a candidate ("terminate" near "end"), as BERTScore and ColBERT do. This script measures that
signal on both dev sets (HotpotQA sentences and paragraphs, ContractNLI spans) and their
dense-gold view, without changing the product:

* ``pipeline``: the default pipeline's selection score (every candidate traced);
* ``tokens``: the IDF-weighted mean, over the question's word pieces (stop words and
  punctuation left out; IDF over the question's candidates), of each piece's best cosine to a
  piece of the candidate — BERTScore's recall with IDF weights;
* ``pipeline + a·tokens``: the standardised selection score plus ``a`` times the standardised
  token score (a = 0.25, 0.5, 1);
* ``cosine``: the pooled cosine alone.

For each it prints R-precision (how many of the best |gold| candidates are gold) and the F1 of
the best 1, 2 and 3; per set, the median cost on its first 20 questions of the pooled encode of
the question and its candidates, of a second pass for their token states (what an index, whose
vectors are pooled, would pay), and of the token scores from states in hand. It ranks, it does not cut: whether the pipeline's cut keeps what a better
ranking offers is a separate question (docs/evaluation.md, session 13).

Usage: python benchmarks/token_match.py [--bundle models/bundles/default] [--limit N] [--precision auto]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import cached_runtime, question_sets, r_precision, ranked  # noqa: E402
from _machine import machine_header, percentile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = (0.25, 0.5, 1.0)
TIMED = 20  # questions per set whose encodes and token scores are timed


class TokenStates:
    """Unit-length token vectors (special tokens dropped) from the bundle encoder's own model,
    tokenizer and length limit, cached by text."""

    def __init__(self, encoder) -> None:
        encoder._load()
        self.encoder = encoder
        self.cache: dict[str, tuple[np.ndarray, list[str]]] = {}

    def __call__(self, texts: list[str]) -> list[tuple[np.ndarray, list[str]]]:
        from meteora_edge.models.onnx_session import feed_for, pad_encodings, tokenize_batch

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        encodings = tokenize_batch(self.encoder._tokenizer, todo) if todo else []
        by_length = sorted(range(len(todo)), key=lambda i: len(encodings[i].ids))  # less padding per batch
        todo, encodings = [todo[i] for i in by_length], [encodings[i] for i in by_length]
        for start in range(0, len(todo), 32):
            batch = encodings[start : start + 32]
            ids, mask = pad_encodings(batch, pad_id=self.encoder.pad_id)
            session = self.encoder._session
            hidden = session.run([self.encoder._output], feed_for(session, {"input_ids": ids, "attention_mask": mask}))[0]
            for row, encoding in enumerate(batch):
                n = int(mask[row].sum())
                vectors = np.asarray(hidden[row, 1 : n - 1], dtype=np.float32)
                vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
                self.cache[todo[start + row]] = (vectors, list(encoding.tokens[1 : n - 1]))
        return [self.cache[t] for t in texts]


def token_scores(question: str, candidates: list[str], states: TokenStates, stop: frozenset[str]) -> np.ndarray:
    """Per candidate: the IDF-weighted mean over the question's pieces of their best cosine in it."""
    (query, pieces), *rest = states([question, *candidates])
    frequency: dict[str, int] = {}
    for _, tokens in rest:
        for token in set(tokens):
            frequency[token] = frequency.get(token, 0) + 1
    n = len(rest)
    weights = np.array([math.log((n + 1) / (frequency.get(p, 0) + 1)) + 1
                        if (p.isalnum() or p.startswith("##")) and p not in stop else 0.0 for p in pieces])
    if weights.sum() == 0:
        weights = np.ones(len(pieces))
    weights /= weights.sum()
    return np.array([float(weights @ (query @ vectors.T).max(axis=1)) if len(vectors) and len(query) else 0.0
                     for vectors, _ in rest])


def ranked_metrics(score: np.ndarray, positions: list[int], gold: frozenset[int]) -> list[float]:
    """R-precision, then F1 of the best 1, 2 and 3 (ties by candidate order)."""
    order = ranked(score, positions)
    out = [r_precision(order, gold)]
    for k in (1, 2, 3):
        hits = len(set(order[:k]) & gold)
        out.append(2 * hits / (min(k, len(order)) + len(gold)) if hits else 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--limit", type=int, help="only the first N questions of each set")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "int8", "int8-dot"),
                        help="which ONNX model of the bundle to run (auto: by the CPU)")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    from meteora_edge.errors import MeteoraError

    loaded, encoder, runtime = cached_runtime(parser, args.bundle, precision=args.precision, onnx=True)
    print(machine_header(("numpy", "onnxruntime")))
    print(f"encoder {encoder.identity}; the pipeline's defaults (model-free), every candidate traced\n")
    try:
        report(runtime, encoder, TokenStates(loaded.encoder), args.limit)
    except MeteoraError as exc:  # a dev file missing or unreadable
        parser.error(str(exc))


def report(runtime, encoder, states: TokenStates, limit: int | None) -> None:
    """One row per ranking, four columns per set (see the module docstring)."""
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.models.analyzer import STOP_WORDS
    from meteora_edge.pipeline.request import SelectRequest
    from meteora_edge.selection.stages import standardise

    stop = STOP_WORDS
    rows = ["pipeline", "tokens", *(f"pipeline + {a}·tokens" for a in WEIGHTS), "cosine"]
    table: dict[str, dict[str, list[float]]] = {}
    names = []
    for name, questions in question_sets(limit, paragraphs=True):
        names.append(name)
        sums = {row: np.zeros(4) for row in rows}
        timings: list[list[float]] = [[], [], [], []]
        for q in questions:
            result = runtime.result(SelectRequest(query=q.question, index=InMemoryIndex(q.candidates, encoder),
                                                  detail="full"))
            candidates = result.trace.to_dict()["candidates"]
            positions = [int(c["chunk_id"]) for c in candidates]
            pipeline = np.array([c["ecse_score"] for c in candidates], dtype=float)
            texts = [q.candidates[p] for p in positions]
            timed = len(timings[0]) < TIMED
            if timed:  # the pooled encode, then the token states, of the same texts, neither cached
                start = time.perf_counter()
                states.encoder.encode([q.question, *texts])
                timings[0].append(time.perf_counter() - start)
                for text in (q.question, *texts):  # the dense-gold view repeats the dev sets' texts
                    states.cache.pop(text, None)
                start = time.perf_counter()
                states([q.question, *texts])
                timings[1].append(time.perf_counter() - start)
                start = time.perf_counter()
            tokens = token_scores(q.question, texts, states, stop)
            if timed:
                timings[2].append(time.perf_counter() - start)
                timings[3].append(len(texts))
            scores = {"pipeline": pipeline, "tokens": tokens,
                      "cosine": np.array([c["dense_score"] for c in candidates], dtype=float)}
            for a in WEIGHTS:
                scores[f"pipeline + {a}·tokens"] = standardise(pipeline) + a * standardise(tokens)
            for row in rows:
                sums[row] += ranked_metrics(scores[row], positions, q.gold)
        table[name] = {row: list(sums[row] / len(questions)) for row in rows}
        pooled, token_pass, scoring, count = (percentile(t, 50) for t in timings)
        print(f"{name}: {len(questions)} questions; first {len(timings[0])}, medians: {count:.0f} candidates, "
              f"pooled encode {1000 * pooled:.1f} ms, token-state pass {1000 * token_pass:.1f} ms, "
              f"token scores from the states {1000 * scoring:.2f} ms", flush=True)
    print(f"\n{'':<24}" + "".join(f"{n:>26}" for n in names))
    print(f"{'ranking':<24}" + "".join(f"{'R-prec  F1@1  F1@2  F1@3':>26}" for _ in names))
    for row in rows:
        print(f"{row:<24}" + "".join(f"{table[n][row][0]:>8.3f}" + "".join(f"{v:>6.3f}" for v in table[n][row][1:])
                                     for n in names))


if __name__ == "__main__":
    main()
