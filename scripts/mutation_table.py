"""The mutation score per module, from the results mutmut keeps in ``mutants/`` (see docs/testing.md).

Reads every ``mutants/**/*.py.meta`` that scripts/mutation.sh left. A mutant named (in
backticks) in the "Equivalent mutants" section of docs/testing.md is left out of its
module's score; the script warns when such a mutant no longer exists or no longer survives,
so the list cannot go stale silently.

    score = (killed + timeout) / (mutants - equivalent - not run)

A timeout is a detected mutant (the tests hang instead of passing), as in Stryker's
definition; "no tests" (no test reaches the mutated function) counts as surviving.

Usage:
    python scripts/mutation_table.py               the Markdown table
    python scripts/mutation_table.py --survivors   names of the mutants not killed (or not run) yet, one a line
    python scripts/mutation_table.py --check 90    exit 1 when a module or the total scores below 90 %
    python scripts/mutation_table.py --names FILE  the table over the mutants named in FILE only (one a
                                                   line; e.g. a sample drawn before the tests for it)
    python scripts/mutation_table.py --sample 70   names of at most 70 not-run mutants per module, drawn
                                                   at random (--seed, default 17): a sample to judge when
                                                   a whole run does not fit in the time there is
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
DOC = ROOT / "docs" / "testing.md"
_MUTANT_NAME = re.compile(r"`(meteora_edge\.[^`\s]+__mutmut_\d+)`")

# mutmut's exit codes (mutmut/stats.py), folded into the columns of the table
_KILLED = {1, 3, 37, -11, -9}  # a failing test, a pytest error, the type checker, a crash
_TIMEOUT = {36, 24, -24, 152, 255}
_SURVIVED = {0}
_NO_TESTS = {5, 33}
COLUMNS = ("mutants", "killed", "timeout", "survived", "no tests", "equivalent", "not run", "score")


def equivalent_mutants(doc: Path = DOC) -> set[str]:
    """Mutant names listed in the doc's "Equivalent mutants" section."""
    if not doc.is_file():
        return set()
    text = doc.read_text(encoding="utf-8")
    match = re.search(r"^## Equivalent mutants\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    return set(_MUTANT_NAME.findall(match.group(1))) if match else set()


def load_results(mutants: Path = MUTANTS) -> dict[str, dict[str, int | None]]:
    """Exit code per mutant name, per module (dotted), for every mutated file."""
    results = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        module = ".".join(meta.relative_to(mutants).with_suffix("").with_suffix("").parts)
        results[module] = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
    return results


def _status(code: int | None) -> str:
    if code is None:
        return "not run"
    for name, codes in (("killed", _KILLED), ("timeout", _TIMEOUT), ("survived", _SURVIVED), ("no tests", _NO_TESTS)):
        if code in codes:
            return name
    return "not run"  # interrupted, skipped or suspicious: run it again


def tally(codes: dict[str, int | None], equivalent: set[str]) -> Counter[str]:
    """Counts per column for one module's mutants."""
    counts: Counter[str] = Counter(mutants=len(codes))
    for name, code in codes.items():
        counts["equivalent" if name in equivalent and _status(code) == "survived" else _status(code)] += 1
    return counts


def score(counts: Counter[str]) -> float | None:
    judged = counts["mutants"] - counts["equivalent"] - counts["not run"]
    return (counts["killed"] + counts["timeout"]) / judged if judged else None


def table(results: dict[str, dict[str, int | None]], equivalent: set[str]) -> tuple[str, list[float | None]]:
    """The Markdown table (a row per module and a total) and the scores in row order."""
    lines = ["| module | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    total: Counter[str] = Counter()
    scores = []
    for module, codes in results.items():
        counts = tally(codes, equivalent)
        total.update(counts)
        scores.append(score(counts))
        lines.append(_row(module.removeprefix("meteora_edge."), counts))
    scores.append(score(total))
    lines.append(_row("**total**", total))
    return "\n".join(lines), scores


def _row(name: str, counts: Counter[str]) -> str:
    value = score(counts)
    cells = [str(counts[c]) for c in COLUMNS[:-1]] + ["–" if value is None else f"{100 * value:.1f} %"]
    return f"| {name} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--survivors", action="store_true", help="print the names of the mutants not killed yet")
    parser.add_argument("--check", type=float, metavar="PERCENT", help="fail when a score is below PERCENT")
    parser.add_argument("--sample", type=int, metavar="N", help="print N random not-run mutants per module")
    parser.add_argument("--seed", type=int, default=17, help="the random seed of --sample (default 17)")
    parser.add_argument("--names", type=Path, metavar="FILE", help="count only the mutants named in FILE")
    args = parser.parse_args(argv)
    results = load_results()
    if args.names is not None:
        try:
            wanted = set(args.names.read_text(encoding="utf-8").split())
        except OSError as exc:
            print(f"Error: cannot read {args.names}: {exc.strerror}", file=sys.stderr)
            return 2
        results = {module: {name: code for name, code in codes.items() if name in wanted}
                   for module, codes in results.items()}
        results = {module: codes for module, codes in results.items() if codes}
        if not results:
            print(f"Error: none of the mutants named in {args.names} has a result in mutants/", file=sys.stderr)
            return 2
    if not results:
        print("Error: no mutation results in mutants/; run scripts/mutation.sh first", file=sys.stderr)
        return 2
    equivalent = equivalent_mutants()
    if args.survivors:
        for codes in results.values():
            for name, code in codes.items():
                if _status(code) in ("survived", "no tests", "not run") and name not in equivalent:
                    print(name)
        return 0
    if args.sample is not None:
        rng = random.Random(args.seed)
        for codes in results.values():
            not_run = sorted(name for name, code in codes.items() if _status(code) == "not run")
            for name in sorted(rng.sample(not_run, min(args.sample, len(not_run)))):
                print(name)
        return 0
    known = {name: code for codes in results.values() for name, code in codes.items()}
    for name in sorted(equivalent if args.names is None else ()):  # a subset lacks most of them
        if name not in known:
            print(f"warning: {name} is listed as equivalent in {DOC.name} but is no longer a mutant", file=sys.stderr)
        elif _status(known[name]) != "survived":
            print(f"warning: {name} is listed as equivalent but {_status(known[name])}", file=sys.stderr)
    text, scores = table(results, equivalent)
    print(text)
    if args.check is not None and any(s is None or 100 * s < args.check for s in scores):
        print(f"Error: a module scores below {args.check:g} %", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
