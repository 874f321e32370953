"""Which chunking keeps evidence best: selections over chunked documents, scored by character.

``meteora-edge eval`` scores selections over the candidates a data set gives (sentences, spans).
A folder gives whole documents instead, and how they are cut decides what a selection can keep.
This script rebuilds each question's documents from a HotpotQA-layout file (each paragraph's
sentences joined: with a line break when ``--joiner newline``, as list items and clauses stand in
a contract, else with a space), cuts them with the product's chunker at each ``--chunking``
(``text:200``, ``words:60`` …: boundaries and words per chunk), runs each method over a question's
chunks in document order, and scores the kept text against the gold sentences character by
character: precision is the share of kept characters inside gold sentences, recall the share of
gold characters kept, F1 their harmonic mean, averaged over the questions. Measured in characters,
selections over different chunkings compare; smaller chunks score higher by construction (the gold
is a sentence or two), so compare boundaries at one size.

Nothing in it knows a data set.

Usage:
    python scripts/chunking_eval.py DATA --chunking text:200,words:200 [--joiner newline|space]
        [--method pipeline --method topk-hybrid:1] [--bundle models/bundles/default] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from meteora_edge import load_encoder
from meteora_edge.errors import MeteoraError
from meteora_edge.evaluation.datasets import EvalQuestion
from meteora_edge.evaluation.methods import build_method
from meteora_edge.index.chunking import BOUNDARIES, chunk_text
from meteora_edge.models.cpu_features import cpu_info

Span = tuple[int, int]


def documents(item: dict, joiner: str) -> list[tuple[str, list[Span]]]:
    """Each paragraph of ``item`` as one text, with the character spans of its gold sentences."""
    facts = item["supporting_facts"]
    gold = set(zip(facts["title"], facts["sent_id"]))
    out = []
    for title, sentences in zip(item["context"]["title"], item["context"]["sentences"]):
        text, spans = "", []
        for i, sentence in enumerate(sentences):
            text += joiner if i else ""
            if (title, i) in gold and sentence.strip():
                spans.append((len(text), len(text) + len(sentence)))
            text += sentence
        out.append((text, spans))
    return out


def covered(kept: Sequence[Span], gold: Sequence[Span]) -> int:
    """Characters of ``gold`` inside the union of ``kept``."""
    total = 0
    for a, b in gold:
        end = a
        for x, y in sorted((max(a, x), min(b, y)) for x, y in kept if min(b, y) > max(a, x)):
            if y > max(x, end):
                total += y - max(x, end)
                end = y
    return total


def score(items: list[dict], boundaries: str, size: int, joiner: str, methods: dict) -> dict[str, np.ndarray]:
    """Per method, one row per question: precision, recall, F1, chunks kept, characters kept, chunks."""
    rows: dict[str, list[tuple[float, ...]]] = {name: [] for name in methods}
    for n, item in enumerate(items):
        texts, where, golds = [], [], []
        for d, (text, spans) in enumerate(documents(item, joiner)):
            for chunk in chunk_text(text, chunk_size=size, boundaries=boundaries):
                texts.append(chunk.text)
                where.append((d, chunk.start_pos, chunk.end_pos))
            golds.append(spans)
        question = EvalQuestion(qid=str(n), question=item["question"], answer=str(item.get("answer", "")),
                                candidates=texts, gold=frozenset())
        gold_chars = sum(b - a for spans in golds for a, b in spans)
        for name, method in methods.items():
            kept = method(question)
            kept_chars = sum(where[i][2] - where[i][1] for i in kept)
            hit = sum(covered([where[i][1:] for i in kept if where[i][0] == d], spans) for d, spans in enumerate(golds))
            p = hit / kept_chars if kept_chars else 0.0
            r = hit / gold_chars if gold_chars else 0.0
            rows[name].append((p, r, 2 * p * r / (p + r) if p + r else 0.0, len(kept), kept_chars, len(texts)))
    return {name: np.asarray(values) for name, values in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="HotpotQA-layout JSON (question, context titles and sentences, supporting_facts)")
    parser.add_argument("--chunking", default="words:200,text:200", help="BOUNDARIES:WORDS, comma-separated")
    parser.add_argument("--joiner", choices=("newline", "space"), default="space",
                        help="what joins a paragraph's sentences into its text")
    parser.add_argument("--method", action="append", default=None, help="eval method spec; repeatable [pipeline, "
                        "topk-hybrid:1..3]")
    parser.add_argument("--bundle", default=None, help="model bundle [the hashing encoder]")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args()
    try:
        chunkings = []
        for spec in args.chunking.split(","):
            boundaries, _, size = spec.partition(":")
            if boundaries not in BOUNDARIES or not size.isdigit() or int(size) < 1:
                raise SystemExit(f"Error: --chunking {spec!r} must be BOUNDARIES:WORDS with BOUNDARIES one of "
                                 f"{', '.join(BOUNDARIES)}")
            chunkings.append((boundaries, int(size)))
        items = json.loads(Path(args.data).read_text(encoding="utf-8"))[: args.limit]
        encoder = load_encoder(args.bundle, cache=True)  # as eval: a contract's chunks are embedded once for all its questions
        specs = args.method or ["pipeline", "topk-hybrid:1", "topk-hybrid:2", "topk-hybrid:3"]
        methods = {spec: build_method(spec, encoder) for spec in specs}
        joiner = "\n" if args.joiner == "newline" else " "
        info = cpu_info()
        print(f"{Path(args.data).name}: {len(items)} questions, sentences joined by {args.joiner}; encoder "
              f"{getattr(encoder, 'identity', 'hashing')}; CPU {info.model}, int8 dot product: {info.int8_dot or 'none'}")
        for boundaries, size in chunkings:
            started = time.perf_counter()
            rows = score(items, boundaries, size, joiner, methods)
            print(f"\n{boundaries}:{size} ({time.perf_counter() - started:.0f} s)")
            print(f"  {'method':<16} {'P':>6} {'R':>6} {'F1':>6} {'items':>6} {'chars':>6} {'chunks':>7}")
            for name, a in rows.items():
                print(f"  {name:<16} {a[:, 0].mean():6.3f} {a[:, 1].mean():6.3f} {a[:, 2].mean():6.3f} "
                      f"{a[:, 3].mean():6.2f} {a[:, 4].mean():6.0f} {a[:, 5].mean():7.1f}")
    except (OSError, ValueError, KeyError, TypeError, MeteoraError) as exc:
        sys.exit(f"Error: {exc}")


if __name__ == "__main__":
    main()
