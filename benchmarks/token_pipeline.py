"""The token-level match of ``token_match.py`` inside the pipeline: F1 and words on every dev table.

``token_match.py`` shows that the token score ranks better. This script asks what the whole
pipeline makes of it. It wraps ECSE's hybrid score for the run (nothing in the product changes):
``weight`` times the standardised token score is added to the rule-written question's row
(``--rows question``, the default) or to every rationale's row (``--rows all``); with
``--first-hop`` the rule that picks the first hop for the second-hop rationale sees it too (by
default it does not). Each weight is run over HotpotQA sentences and paragraphs, ContractNLI and
the dense-gold view; weight 0 is the pipeline's defaults, from the same code. Under the table: for
each weight, how many questions of each set it answers better / worse than the defaults (F1).

Usage: python benchmarks/token_pipeline.py [--bundle models/bundles/default] [--weight W ...]
       [--rows question|all] [--first-hop] [--limit N]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import cached_runtime, f1_and_words, question_sets  # noqa: E402
from _machine import machine_header  # noqa: E402
from token_match import TokenStates, token_scores  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class TokenTerm:
    """While :meth:`active`, ECSE's hybrid rows get ``weight`` × the standardised token score."""

    def __init__(self, states: TokenStates, rows: str, first_hop: bool) -> None:
        from meteora_edge.models.analyzer import STOP_WORDS

        self.states, self.rows, self.first_hop, self.stop = states, rows, first_hop, STOP_WORDS
        self.weight = 0.0

    @contextlib.contextmanager
    def active(self):
        from meteora_edge.selection import ecse
        from meteora_edge.selection.stages import standardise

        score, plan_auto = ecse._Scorer.score, ecse.MeteoraSelector.plan_auto
        term = self

        def scored(scorer, rationales):
            scores = score(scorer, rationales)
            if term.weight == 0 or scorer.selector.scoring != "hybrid":
                return scores
            fused = scores.fused.copy()
            for row, rationale in enumerate(rationales):
                if term.rows == "all" or rationale.label == "question":
                    tokens = token_scores(rationale.text, scorer.texts, term.states, term.stop)
                    fused[row] += term.weight * standardise(tokens)
            return ecse._Scores(scores.rationale_vectors, scores.lexical, fused)

        def planned(selector, *args, **kwargs):
            if term.first_hop:
                return plan_auto(selector, *args, **kwargs)
            weight, term.weight = term.weight, 0.0
            try:
                return plan_auto(selector, *args, **kwargs)
            finally:
                term.weight = weight

        ecse._Scorer.score, ecse.MeteoraSelector.plan_auto = scored, planned
        try:
            yield
        finally:
            ecse._Scorer.score, ecse.MeteoraSelector.plan_auto = score, plan_auto


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--weight", type=float, action="append", help="token weights to run (default 0.75 and 1)")
    parser.add_argument("--rows", choices=("question", "all"), default="question")
    parser.add_argument("--first-hop", action="store_true", help="the first hop's choice sees the token score too")
    parser.add_argument("--limit", type=int, help="only the first N questions of each set")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    weights = [0.0, *(args.weight or [0.75, 1.0])]
    if any(w < 0 for w in weights):
        parser.error("--weight must be at least 0")

    from meteora_edge.errors import MeteoraError

    loaded, encoder, runtime = cached_runtime(parser, args.bundle, onnx=True)
    print(machine_header(("numpy", "onnxruntime")))
    print(f"encoder {encoder.identity}; the pipeline's defaults plus the token score on "
          f"{'the question' if args.rows == 'question' else 'every rationale'}'s row, the first hop "
          f"{'with' if args.first_hop else 'without'} it\n")
    try:
        term = TokenTerm(TokenStates(loaded.encoder), args.rows, args.first_hop)
        report(runtime, encoder, term, weights, args.limit)
    except MeteoraError as exc:  # a dev file missing or unreadable
        parser.error(str(exc))


def report(runtime, encoder, term: TokenTerm, weights: list[float], limit: int | None) -> None:
    """F1 / words per weight (rows) and set (columns)."""
    table: dict[str, dict[float, tuple[float, float, int, int]]] = {}
    with term.active():
        for name, questions in question_sets(limit, paragraphs=True):
            table[name] = {}
            defaults: list[float] = []
            for weight in weights:
                term.weight = weight
                f1, words = f1_and_words(runtime, encoder, questions)
                defaults = defaults or f1  # weights[0] is 0: the defaults
                better = sum(a > b for a, b in zip(f1, defaults))
                worse = sum(a < b for a, b in zip(f1, defaults))
                table[name][weight] = (statistics.mean(f1), statistics.mean(words), better, worse)
            print(f"{name}: {len(questions)} questions", flush=True)
    print(f"\n{'F1 / words':<14}" + "".join(f"{n:>18}" for n in table))
    for weight in weights:
        label = "defaults" if weight == 0 else f"+ {weight:g}·tokens"
        print(f"{label:<14}" + "".join(f"{table[n][weight][0]:>10.3f} / {table[n][weight][1]:>5.1f}" for n in table))
    print(f"\n{'better / worse':<14}" + "".join(f"{n:>18}" for n in table))
    for weight in weights[1:]:
        print(f"{f'+ {weight:g}·tokens':<14}" + "".join(f"{table[n][weight][2]:>10} / {table[n][weight][3]:<5}" for n in table))


if __name__ == "__main__":
    main()
