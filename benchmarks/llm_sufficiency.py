"""Can the local model tell when the passages kept so far are enough? A count from sufficiency, measured.

The LLM rerank ranks well but its cut does not count: on the dev tables a perfect count of its
ranking would beat the best fixed K by far more than today's cut does (docs/evaluation.md,
session 19), and no per-passage score tells how many passages a question needs. This script
asks the model a question about the *set* instead: walking down the rerank's ranking, it shows
the model the best 1, 2, … passages together and reads ``log P(Yes) − log P(No)`` for "do the
passages below, taken together, give every fact needed to answer the question?". A cut could
stop where the model first says yes.

It reads a recording of ``benchmarks/llm_pool.py --record`` (the pools, ECSE's and the model's
scores per question), orders each pool of 8 as the rerank does (``z(ECSE) + 1.5 · z(LLM)``), and:

* ``--record FILE``: runs the model on every prefix of that order up to ``--max-k`` passages and
  writes the margins (one llama.cpp call a prefix; the prompt of a longer prefix extends the
  shorter one's, so llama.cpp re-reads only the new passage);
* ``--replay FILE``: reads such a file instead.

Either way it prints, per set, F1 / passages kept / Pearson's r with the gold count for today's cut,
fixed prefixes and cuts on the margins, and the median margin of the prefixes that hold every
gold passage against those that do not. If the model could judge sufficiency, the first median
would be the higher one.

    python benchmarks/llm_pool.py --record /tmp/pool.json --limit 40
    python benchmarks/llm_sufficiency.py --pools /tmp/pool.json --record /tmp/suff.json [--model F.gguf]
    python benchmarks/llm_sufficiency.py --replay /tmp/suff.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import question_sets  # noqa: E402
from _machine import correlation, machine_header  # noqa: E402
from llm_pool import DEFAULT_MODEL, FIELDS as POOL_FIELDS, read_recording, replay_kept, replay_order  # noqa: E402

POOL, WEIGHT, Z = 8, 1.5, 0.5  # the rerank's defaults (PipelineConfig.llm_pool, llm_weight, llm_z)
FIELDS = {"gold", "order", "kept", "margins", "seconds"}  # what a question of this script's recording holds
SYSTEM = "You check evidence for a question-answering system."
ASKS = {  # the ask, and whether a Yes says the passages are enough (the other ask asks the opposite, against a Yes bias)
    "complete": ("Do the passages below, taken together, give every fact needed to answer the question? "
                 "Answer Yes or No.", True),
    "missing": ("Is a fact needed to answer the question missing from the passages below? Answer Yes or No.", False),
}
MAX_PASSAGE_CHARS = 1500


def ranking(row: dict) -> tuple[list[int], list[int]]:
    """The rerank's order of the recorded pool (cut to the default pool) and what its default cut keeps."""
    return replay_order(row, POOL, WEIGHT), replay_kept(row, POOL, WEIGHT, Z)[0]


def prompt(question: str, passages: list[str], ask: str):
    """The chat messages that show the model these passages together, with ``ask`` (a key of ``ASKS``)."""
    from meteora_edge.models.llm_model import ChatMessage

    listed = "\n".join(f"[{i}] {' '.join(p.split())[:MAX_PASSAGE_CHARS]}" for i, p in enumerate(passages, start=1))
    return [ChatMessage("system", (SYSTEM,)),
            ChatMessage("user", (f"Question: {' '.join(question.split())}\n\n{ASKS[ask][0]}\n\nPassages:\n", listed))]


def record(args, pools: dict) -> dict:
    from meteora_edge import LocalLLM

    llm = LocalLLM.load(args.model, threads=args.threads, context_size=4096)
    yes, no = llm.tokenize("Yes")[0], llm.tokenize("No")[0]
    sign = 1.0 if ASKS[args.ask][1] else -1.0
    out = {"machine": machine_header(("numpy", "llama_cpp_python")), "model": Path(args.model).name,
           "threads": args.threads, "ask": args.ask, "sets": {}}
    limit = max(len(rows) for rows in pools["sets"].values())
    for name, questions in question_sets(limit):
        rows = pools["sets"].get(name)
        if rows is None:
            continue
        done = []
        for q, row in zip(questions, rows):
            if sorted(q.gold) != row["gold"]:
                raise SystemExit(f"llm_sufficiency.py: error: {args.pools} was recorded from other data than the dev "
                                 f"sets (set {name}, question {len(done) + 1}); record it again")
            order, kept = ranking(row)
            started, margins = time.perf_counter(), []
            for k in range(1, min(args.max_k, len(order)) + 1):
                tokens = llm.chat_tokens(prompt(q.question, [q.candidates[c] for c in order[:k]], args.ask))
                logprob_yes, logprob_no = llm.next_token_logprobs(tokens, (yes, no))
                margins.append(sign * (logprob_yes - logprob_no))
            done.append({"gold": row["gold"], "order": order, "kept": kept, "margins": margins,
                         "seconds": time.perf_counter() - started})
            print(f"  {name} {len(done)}: {done[-1]['seconds']:.1f} s, margins "
                  + " ".join(f"{m:+.2f}" for m in margins), flush=True)
        out["sets"][name] = done
    return out


def first_at_least(threshold: float) -> Callable[[dict], int]:
    """Stop at the first prefix the model scores at or above ``threshold`` (all of them when none does)."""
    return lambda row: next((k for k, m in enumerate(row["margins"], start=1) if m >= threshold), len(row["margins"]))


def while_rising(step: float) -> Callable[[dict], int]:
    """Add the next passage while it raises the margin by ``step`` or more."""
    def count(row: dict) -> int:
        m, k = row["margins"], 1
        while k < len(m) and m[k] - m[k - 1] >= step:
            k += 1
        return k
    return count


RULES: dict[str, Callable[[dict], int]] = {
    "today's cut (llm_z 0.5)": lambda row: len(row["kept"]),
    **{f"best {k}": (lambda row, k=k: k) for k in (1, 2, 3)},
    **{f"first prefix with margin >= {t}": first_at_least(t) for t in (0.0, 0.5, 1.0, 1.5)},
    "the prefix of the highest margin": lambda row: int(np.argmax(row["margins"])) + 1,
    **{f"add while the margin rises >= {s}": while_rising(s) for s in (0.1, 0.25)},
}


def f1(kept: list[int], gold: list[int]) -> float:
    hits = len(set(kept) & set(gold))
    return 2 * hits / (len(kept) + len(gold)) if kept else 0.0


def table(data: dict) -> None:
    print(data["machine"])
    print(f"model {data['model']}, {data['threads']} thread(s), ask {data.get('ask', 'complete')!r}; the rerank's order of a pool of {POOL} "
          f"(weight {WEIGHT}); cells: F1 / passages kept / r(gold count, kept)\n")
    names = list(data["sets"])
    print(f"{'rule':<38}" + "".join(f"{name:>22}" for name in names))
    for rule, count in RULES.items():
        cells = []
        for name in names:
            rows = data["sets"][name]
            kept = [row["order"][:count(row)] for row in rows]
            cells.append(f"{statistics.mean(f1(k, r['gold']) for k, r in zip(kept, rows)):.3f} / "
                         f"{statistics.mean(len(k) for k in kept):.2f} / "
                         f"{correlation([len(r['gold']) for r in rows], [len(k) for k in kept])}")
        print(f"{rule:<38}" + "".join(f"{c:>22}" for c in cells))
    print("\nmedian margin of the prefixes that hold every gold passage / of those that do not (prefixes)")
    for name in names:
        whole, partial = [], []
        for row in data["sets"][name]:
            for k, margin in enumerate(row["margins"], start=1):
                (whole if set(row["gold"]) <= set(row["order"][:k]) else partial).append(margin)
        cells = [f"{np.median(v):+.2f} ({len(v)})" if v else "- (0)" for v in (whole, partial)]
        seconds = statistics.median(row["seconds"] for row in data["sets"][name])
        print(f"{name:<12} {cells[0]:>12} / {cells[1]:<12} {seconds:.1f} s a question (median)")


def main() -> None:
    from meteora_edge.errors import MeteoraError
    from meteora_edge.fileio import write_text_atomic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=Path, help="a recording of benchmarks/llm_pool.py --record (for --record)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="the GGUF model (for --record)")
    parser.add_argument("--threads", type=int, default=2, help="the GGUF model's threads")
    parser.add_argument("--ask", choices=sorted(ASKS), default="complete",
                        help="complete: 'do the passages give every fact needed?'; missing: 'is a needed fact missing?'")
    parser.add_argument("--max-k", type=int, default=6, help="the longest prefix shown to the model")
    parser.add_argument("--record", type=Path, help="run the model and write the margins here")
    parser.add_argument("--replay", type=Path, help="read margins written by --record instead of running the model")
    args = parser.parse_args()
    if args.max_k < 1:
        parser.error("--max-k must be at least 1")
    if args.record:
        if args.pools is None:
            parser.error("--record needs --pools FILE (a recording of benchmarks/llm_pool.py --record)")
        pools = read_recording(parser, args.pools, "a recording of llm_pool.py", POOL_FIELDS)
        if not args.model.is_file():
            parser.error(f"no GGUF model at {args.model}; give --model FILE.gguf")
        try:
            data = record(args, pools)
        except MeteoraError as exc:
            parser.exit(2, f"llm_sufficiency.py: error: {exc}\n")
        write_text_atomic(args.record, json.dumps(data))
    elif args.replay:
        data = read_recording(parser, args.replay, "a recording of this script (write one with --record)", FIELDS)
    else:
        parser.error("give --record FILE or --replay FILE")
    table(data)


if __name__ == "__main__":
    main()
