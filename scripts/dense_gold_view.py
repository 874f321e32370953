"""A view of an evaluation set in which gold is a larger share of the candidates.

Both dev sets give a question many candidates and few gold ones (HotpotQA: 2-5 of ~44
sentences; ContractNLI: 1-6+ of ~80 spans). A question that needs four or five facts out of
twenty-five is a different shape, and a cut tuned on the first shape can keep too few there.
This script keeps the questions with at least ``--min-gold`` gold candidates, keeps all their
gold candidates and a seeded random sample of the others, up to ``--candidates`` in all, in
their original order, and writes per-query JSONL for ``meteora-edge eval --data``.

It derives the view from the data it is given; nothing in it knows a data set.

Usage:
    python scripts/dense_gold_view.py DATA [DATA ...] -o OUT.jsonl [--level paragraph]
                                      [--min-gold 3] [--candidates 25] [--seed 0]

Each DATA file is read in the layout ``meteora-edge eval`` would read it in; the rows of all
of them go to OUT, in order.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from meteora_edge.errors import MeteoraError
from meteora_edge.evaluation.datasets import load_questions


def view(data: str, *, level: str | None, min_gold: int, candidates: int, seed: int) -> list[dict]:
    """The JSONL rows of the view (see the module docstring)."""
    rng = random.Random(seed)
    rows = []
    for q in load_questions(data, level=level):
        if len(q.gold) < min_gold or len(q.gold) > candidates:
            continue
        others = [i for i in range(len(q.candidates)) if i not in q.gold]
        keep = sorted(set(q.gold) | set(rng.sample(others, min(len(others), candidates - len(q.gold)))))
        rows.append({"id": q.qid, "query": q.question, "answer": q.answer,
                     "candidates": [q.candidates[i] for i in keep],
                     "gold": [keep.index(i) for i in sorted(q.gold)],
                     "group": q.group})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="+")
    parser.add_argument("-o", "--out", required=True)
    parser.add_argument("--level", choices=["sentence", "paragraph"], help="HotpotQA layout only (default: sentence)")
    parser.add_argument("--min-gold", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.min_gold < 1 or args.candidates < args.min_gold:
        parser.error("need 1 <= --min-gold <= --candidates")
    rows = []
    try:
        for data in args.data:
            rows += view(data, level=args.level, min_gold=args.min_gold, candidates=args.candidates, seed=args.seed)
    except MeteoraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print(f"error: no question has {args.min_gold} or more gold candidates", file=sys.stderr)
        return 1
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"{len(rows)} questions -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
