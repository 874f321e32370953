"""Write, or check, the tables of docs/evaluation.md from the files `scripts/evaluate.sh` writes.

Every table of docs/evaluation.md is a ```text block right after a marker that names its source,
a path under docs/:

    <!-- eval-table: eval/sentence.txt methods=bm25:2|topk-hybrid:2|pipeline -->

* a ``.txt`` source (what `meteora-edge eval` prints) gives its method table's two header lines,
  the rows of the methods named (all of them without ``methods=``; ``table=by-gold-count``
  picks the F1-by-gold-count table instead, ``table=retrieval`` a corpus run's retrieval table), then the file's notes in parentheses, the CPU among them;
* a ``.json`` source (`eval -o`'s report, for the corpus runs that have no .txt) gives a table of
  its methods with retrieval recall@10, then the run's size, encoder and CPU;
* ``lines=N`` gives the file's first N lines as they are (the LLM ``.time`` and build files).

    python scripts/eval_tables.py            # rewrite the blocks from docs/eval/
    python scripts/eval_tables.py --check    # exit 1 naming each block that differs from its source
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "evaluation.md"
MARKER = re.compile(r"^<!-- eval-table: (?P<source>\S+)(?P<options>(?: \w+=\S+)*) -->$")


class TableError(ValueError):
    """A marker whose source or options cannot give a table."""


def _paragraphs(text: str) -> list[list[str]]:
    blocks, current = [], []
    for line in text.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _method(line: str) -> str:
    return re.split(r"\s{2,}", line.strip())[0]


def _from_text(path: Path, options: dict[str, str]) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if "lines" in options:
        return text.splitlines()[: int(options["lines"])]
    blocks = [block[1:] if len(block) > 3 and block[0].endswith(":") and set(block[2]) == {"-"} else block
              for block in _paragraphs(text)]  # a corpus run titles its tables ("selection (...):")
    tables = [block for block in blocks if len(block) > 2 and set(block[1]) == {"-"}]
    if not tables:
        raise TableError(f"{path.name} holds no table")
    wanted = options.get("table", "methods")
    if wanted == "methods":
        table = tables[0]
    elif wanted == "retrieval":  # a corpus run's retrieval table (R@10, R@pool, R@cand, nDCG@10)
        found = [block for block in tables if "nDCG@10" in block[0]]
        if not found:
            raise TableError(f"{path.name} has no retrieval table")
        table = found[0]
    else:
        title = wanted.replace("by-", "by ", 1)
        found = [block for block in tables if block[0].startswith("F1 " + title)]
        if not found:
            raise TableError(f"{path.name} has no table 'F1 {title}'")
        table = found[0]
    rows = [line for line in table[2:] if not line.startswith("(")]
    if "methods" in options:
        names = options["methods"].split("|")
        by_name = {_method(line): line for line in rows}
        missing = [name for name in names if name not in by_name]
        if missing:
            raise TableError(f"{path.name} has no row for {', '.join(missing)}")
        rows = [by_name[name] for name in names]
    notes = [line for line in text.splitlines() if line.startswith("(") and line.endswith(")")]
    return table[:2] + rows + list(dict.fromkeys(notes))


def _from_report(path: Path, options: dict[str, str]) -> list[str]:
    report = json.loads(path.read_text(encoding="utf-8"))
    meta, methods = report["meta"], report["methods"]
    width = max(len(m["method"]) for m in methods) + 2
    lines = [f"{'method':<{width}}{'P':>7}{'R':>7}{'F1':>7}{'all-gold':>9}{'items':>7}{'tokens':>8}"
             f"{'recall@10':>10}{'ms p50':>9}"]
    lines.append("-" * len(lines[0]))
    for m in methods:
        recall = m.get("retrieval", {}).get("recall@10")
        lines.append(f"{m['method']:<{width}}{m['precision']:>7.3f}{m['recall']:>7.3f}{m['f1']:>7.3f}"
                     f"{m['all_gold']:>9.3f}{m['items']:>7.2f}{m['tokens']:>8.1f}"
                     f"{'-' if recall is None else format(recall, '.3f'):>10}{m['latency_ms_p50']:>9.1f}")
    lines.append(f"({meta['queries']} queries over {meta['chunks']} chunks of {meta['documents']} documents; "
                 f"index built in {meta['index_seconds']:.0f} s; encoder {meta['encoder']})")
    lines.append(f"(CPU: {meta['cpu']}, {meta['machine']}; int8 dot-product: {meta['cpu_int8_dot'] or 'none'})")
    return lines


def render(source: str, options: dict[str, str], docs: Path) -> list[str]:
    """The lines of the table a marker asks for."""
    path = docs / source
    if not path.is_file():
        raise TableError(f"{source} does not exist under {docs}")
    return _from_report(path, options) if path.suffix == ".json" else _from_text(path, options)


def rewrite(page: str, docs: Path) -> tuple[str, list[str]]:
    """The page with every marked block rendered from its source, and the sources whose block changed."""
    lines = page.splitlines()
    out: list[str] = []
    changed: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        index += 1
        match = MARKER.match(line)
        if not match:
            continue
        options = dict(option.split("=", 1) for option in match.group("options").split())
        if index >= len(lines) or lines[index] != "```text":
            raise TableError(f"the marker for {match.group('source')} is not followed by a ```text block")
        end = lines.index("```", index + 1)
        table = render(match.group("source"), options, docs)
        if lines[index + 1 : end] != table:
            changed.append(match.group("source"))
        out += ["```text", *table, "```"]
        index = end + 1
    return "\n".join(out) + "\n", changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block differs")
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    try:
        text, changed = rewrite(args.page.read_text(encoding="utf-8"), args.page.parent)
    except TableError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for source in changed:
            print(f"{args.page.name}: the table from {source} differs from the file (run scripts/eval_tables.py)")
        return 1 if changed else 0
    args.page.write_text(text, encoding="utf-8")
    print(f"{len(changed)} table(s) rewritten" if changed else "every table already matches its file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
