"""What each rule of the default pipeline adds on each dev table, and whether it is more than noise.

The model-free defaults stack several rules on ECSE's pooled cut: the rule-written second hop,
the leading block, the term cover, the token cover, the spare for near-duplicates that bring new
words, and MeVe's BM25 fallback and de-duplication. Each was kept because it raised a dev table's
mean F1; a rule whose gain rests on a few questions is what a set the team has not seen would
not repeat. This script runs the defaults and, for each rule, the defaults with that rule alone
turned off, over HotpotQA sentences and paragraphs, ContractNLI and the dense-gold view
(``scripts/dense_gold_view.py``: 3 or more gold items, 25 candidates). Per set and rule it prints
what the rule adds: the defaults' F1 minus the F1 without it, a 95 % paired bootstrap interval of
that difference (questions resampled, seeded), the questions the rule makes better / worse, and
the words it adds to a question on average. An interval that holds 0 says the dev set cannot tell
the rule from chance. A rule the defaults do not run on a set (the term cover, where the token
cover runs) adds exactly 0 there. Each ``--variant`` (pipeline settings as JSON, e.g.
``'{"token_cover_z": 1.0}'``) is then run as a whole and compared with the defaults the same way.

Usage: python benchmarks/ablation.py [--bundle models/bundles/default | --hashing] [--limit N] [--resamples 2000]
       [--variant JSON ...] [--no-rules] [--data FILE ...]

--data runs your own evaluation files (as `meteora-edge eval` reads them) instead of the dev sets.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import cached_runtime, dev_arguments, f1_and_words, question_sets, reported  # noqa: E402
from _machine import machine_header  # noqa: E402


@contextlib.contextmanager
def _no_second_hop():
    """While active, the rule that writes the second hop finds no bridge."""
    from meteora_edge.selection import auto_rationales, ecse

    plan = ecse.plan_second_hop

    def no_hop(*args, **kwargs):
        hop = plan(*args, **kwargs)
        return auto_rationales.SecondHop(None, [], "turned off for the ablation", hop.considered)

    ecse.plan_second_hop = no_hop
    try:
        yield
    finally:
        ecse.plan_second_hop = plan


#: (the rule, the settings that turn it off, a context that turns it off) — in the pipeline's order
RULES = (
    ("second hop", {}, _no_second_hop),
    ("leading block", {"pooled_gap": 0.0}, contextlib.nullcontext),
    ("term cover", {"cover_z": None}, contextlib.nullcontext),
    ("token cover", {"token_cover": None}, contextlib.nullcontext),
    ("spare new words", {"spare_new_words": False}, contextlib.nullcontext),
    ("BM25 fallback", {"n_min": 0}, contextlib.nullcontext),
    ("de-duplication", {"theta_redundancy": None}, contextlib.nullcontext),
)


def bootstrap(differences: list[float], resamples: int, seed: int = 0) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean of ``differences`` over seeded resamples."""
    import numpy as np

    values = np.asarray(differences, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples [2000]")
    parser.add_argument("--hashing", action="store_true", help="run the hashing encoder (no model) instead of --bundle")
    parser.add_argument("--variant", action="append", default=[], help="pipeline settings as JSON, against the defaults")
    parser.add_argument("--no-rules", action="store_true", help="only the variants, not each rule turned off")
    args = dev_arguments(parser)
    if args.resamples < 100:
        parser.error("--resamples must be at least 100")
    variants = [_variant(parser, text) for text in args.variant]
    if args.hashing:
        from meteora_edge import HashingEncoder
        from meteora_edge.evaluation.methods import CachedEncoder
        from meteora_edge.pipeline.runtime import SelectRuntime

        encoder = CachedEncoder(HashingEncoder())
        runtime = SelectRuntime(encoder=encoder)
    else:
        _, encoder, runtime = cached_runtime(parser, args.bundle)
    print(machine_header(("numpy", "onnxruntime")))
    print(f"encoder {encoder.identity}; the pipeline's defaults (model-free), and each rule turned off alone; "
          f"per rule: what it adds (defaults − without it), F1 with a 95 % paired bootstrap interval "
          f"({args.resamples} resamples), questions better / worse, words\n")
    rules = () if args.no_rules else RULES
    reported(parser, report, runtime, encoder, args.limit, args.resamples, rules, variants, args.data)


def _variant(parser, text: str) -> dict:
    """``text`` as checked pipeline settings; anything else ends in ``parser.error``."""
    import json

    from meteora_edge.errors import MeteoraError
    from meteora_edge.pipeline.config import PipelineConfig

    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        parser.error(f"--variant {text!r} is not JSON: {exc.msg}")
    if not isinstance(settings, dict) or not settings:
        parser.error(f"--variant {text!r} must be a JSON object of pipeline settings, e.g. '{{\"token_cover_z\": 1.0}}'")
    try:
        PipelineConfig.from_dict(settings)
    except MeteoraError as exc:
        parser.error(f"--variant {text!r}: {exc}")
    return settings


def report(runtime, encoder, limit: int | None, resamples: int, rules=RULES, variants=(), data=()) -> None:
    """One block per set: the defaults' F1 and words, then one row per rule and one per variant."""
    import json

    for name, questions in question_sets(limit, paragraphs=True, data=data):
        f1, words = f1_and_words(runtime, encoder, questions, {})
        print(f"{name}: {len(questions)} questions, defaults F1 {statistics.mean(f1):.3f}, "
              f"{statistics.mean(words):.1f} words")
        if rules:
            print(f"  {'rule':<16} {'adds F1':>8} {'95 % interval':>17} {'better / worse':>15} {'words':>7}")
        for rule, settings, turned_off in rules:
            with turned_off():
                without, words_without = f1_and_words(runtime, encoder, questions, settings)
            print(f"  {rule:<16} " + _compared(f1, without, statistics.mean(words) - statistics.mean(words_without),
                                              resamples), flush=True)
        if variants:
            print(f"  {'variant':<16} {'F1':>6} {'words':>6} {'− defaults':>10} {'95 % interval':>17} {'better / worse':>15}")
        for settings in variants:
            other, other_words = f1_and_words(runtime, encoder, questions, settings)
            print(f"  {json.dumps(settings)}\n  {'':<16} {statistics.mean(other):>6.3f} {statistics.mean(other_words):>6.1f} "
                  + _compared(other, f1, None, resamples), flush=True)
        print()


def _compared(f1: list[float], baseline: list[float], words: float | None, resamples: int) -> str:
    """Mean difference, its bootstrap interval, questions better / worse (and the words it adds)."""
    differences = [a - b for a, b in zip(f1, baseline)]
    low, high = bootstrap(differences, resamples)
    better = sum(d > 0 for d in differences)
    worse = sum(d < 0 for d in differences)
    added = "" if words is None else f" {words:>+7.1f}"
    return (f"{statistics.mean(differences):>+8.3f}   [{low:>+6.3f}, {high:>+6.3f}] "
            f"{better:>7} / {worse:<5}{added}")


if __name__ == "__main__":
    main()
