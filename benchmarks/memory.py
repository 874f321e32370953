"""Peak memory and start-up: chunking against input size, index builds and select at scale, the CLI's start-up.

Usage: python benchmarks/memory.py [--sizes 25,50,100,200] [--repeats 3] [--shapes words,one-word]
                                   [--index-chunks 100000,200000] [--ann ivf] [--per-document 1]
                                   [--startup [--before DIR]]

Index builds (``--index-chunks``; ``--sizes ''`` skips the chunking table): each size is built in
a fresh process from ``benchmarks/pipeline.py``'s synthetic Zipf corpus (40 words a chunk,
generated 100 000 chunks at a time, ``--per-document`` chunks to a document), embedded with
the model-free hashing encoder, with an ``--ann`` structure. The table gives the build's peak
RSS, the RSS the caller's documents already took before the build (``corpus``), and the peak
RSS and wall time of a real
``meteora-edge select --index`` (hashing encoder, the pipeline's defaults, kNN through the ANN
structure) over the index, median of ``--repeats``.

Start-up (``--startup``): wall time and peak RSS of ``meteora-edge --version``, ``select
--help`` and a real ``select`` over ``examples/contract_clauses.json`` with the hashing
encoder, median of ``--repeats`` (at least 5); ``--before DIR`` runs them interleaved with a
previous checkout (``git archive`` of it, with ``cli/`` moved into ``meteora_edge/``) first on
``PYTHONPATH``.

Chunking:

Each input is a single-line file of the given size in MB: ``words`` (random words, the case of
issue 17: 200 MB took 5.25 GB in ``chunk`` and 5.8 GB in ``index build``) or ``one-word`` (no
whitespace at all, so the whole file is one chunk). Every measurement runs in a fresh process;
its peak RSS comes from ``wait4``. ``chunk`` runs the real command (``-o``, 256-word chunks);
``index chunking`` reads the file with ``read_documents`` and runs the index's own chunking
step (``chunk_records.chunk_lines`` into the build's record spool, 200-word chunks), everything
``index build`` does before it embeds. ``baseline`` is the interpreter with the same
imports and no input. The goal is a peak of at most 3x the input.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header  # noqa: E402

MB = 1_000_000
_INDEX_CHUNKING = """
import sys
from meteora_edge.index.corpus import read_documents
from meteora_edge.index.chunk_records import chunk_lines  # the index's own chunking step
from meteora_edge.index.record_spool import RecordSpool
with RecordSpool() as records:
    for _, text, line in chunk_lines(read_documents(sys.argv[1:]), 0, 200, None):  # as 'index build' (size 200)
        records.append(line, len(text))
"""
_INDEX_BUILD = """
import json, sys, time
sys.path.insert(0, sys.argv[4])
from pipeline import synthetic_corpus
from meteora_edge import HashingEncoder, LocalIndex
from meteora_edge.index.ann_index import AnnConfig
from meteora_edge.index.corpus import SourceDocument
n, out, ann, per = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[5])
docs = []
for lo in range(0, n, 100_000):
    texts = synthetic_corpus(min(100_000, n - lo), seed=7 + lo)
    docs += [SourceDocument(str(lo + i), " ".join(texts[i : i + per]), {}) for i in range(0, len(texts), per)]
del texts
with open("/proc/self/status", encoding="ascii") as status:
    rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) * 1024
LocalIndex.build(out, docs, HashingEncoder(), chunk_size=40, overlap=0, batch_size=1024,
                 ann=AnnConfig(kind=ann) if ann else None)
print(json.dumps({"corpus_bytes": rss}))
"""
QUERIES = ("w12 w407 w3 w98 w1520", "w7 w77 w2500 w31 w8", "w1 w19 w640 w5 w233")
_BASELINE = "import meteora_edge.cli.main, meteora_edge.index.corpus, meteora_edge.index.chunking"


def write_input(path: Path, size: int, shape: str) -> None:
    """A single-line file of ``size`` bytes: random words, or one run without whitespace."""
    rng = random.Random(0)
    vocabulary = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 10))) for _ in range(5000)]
    with open(path, "w", encoding="ascii") as handle:
        written = 0
        while written < size:
            if shape == "one-word":
                block = "x" * min(1 << 20, size - written)
            else:
                block = " ".join(rng.choices(vocabulary, k=20_000)) + " "
                block = block[: size - written]
            handle.write(block)
            written += len(block)


def peak_mb(command: list[str], *, output: list[str] | None = None,
            env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run ``command``; return its peak RSS in MB (from wait4) and its wall time in seconds
    (its standard output appended to ``output`` when given)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE if output is not None else subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read().decode() if proc.stdout else ""  # small: a line of JSON at most
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{command[:4]} failed: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}")
    if output is not None:
        output.append(out)
    return usage.ru_maxrss * 1024 / MB, seconds  # ru_maxrss is in KiB


def index_table(sizes: list[int], ann: str, per_document: int, repeats: int, tmp: Path) -> None:
    """Peak RSS of a build and of a ``select --index`` over it, per size (fresh processes)."""
    python, cli = sys.executable, str(Path(sys.executable).with_name("meteora-edge"))
    here = str(Path(__file__).resolve().parent)
    print(f"\nindex build and select --index, hashing encoder, ANN {ann or 'none'}, {per_document} chunk(s) of 40 "
          f"words a document; build once, select median of "
          f"{repeats} (queries {', '.join(QUERIES[:repeats])} …)")
    print(f"{'chunks':>9} | {'build s':>7} {'corpus MB':>9} {'build peak MB':>13} {'peak-corpus':>11} | "
          f"{'select peak MB':>14} {'select s':>8}")
    for n in sizes:
        out = tmp / f"index-{n}"
        lines: list[str] = []
        build_mb, build_s = peak_mb([python, "-c", _INDEX_BUILD, str(n), str(out), ann, here, str(per_document)],
                                    output=lines)
        corpus_mb = json.loads(lines[-1])["corpus_bytes"] / MB
        selects = [peak_mb([cli, "select", "--index", str(out), "--query", QUERIES[i % len(QUERIES)]])
                   for i in range(repeats)]
        print(f"{n:>9,} | {build_s:>7.0f} {corpus_mb:>9.0f} {build_mb:>13.0f} {build_mb - corpus_mb:>11.0f} | "
              f"{statistics.median(m for m, _ in selects):>14.0f} {statistics.median(s for _, s in selects):>8.2f}")
        shutil.rmtree(out, ignore_errors=True)


def startup_table(repeats: int, before: str | None) -> None:
    """Wall time and peak RSS of the CLI's light paths and a real select (hashing encoder); with
    ``before`` (a folder laid out as installed: ``meteora_edge/`` with ``cli/`` inside) the same
    commands run with it first on ``PYTHONPATH``, interleaved with this checkout's."""
    cli = str(Path(sys.executable).with_name("meteora-edge"))
    clauses = str(Path(__file__).resolve().parents[1] / "examples" / "contract_clauses.json")
    commands = {
        "--version": [cli, "--version"],
        "select --help": [cli, "select", "--help"],
        "select --chunks (hashing)": [cli, "select", "--chunks", clauses, "--query", "Who may terminate?"],
    }
    sides = {"now": dict(os.environ)}
    if before:
        sides = {"before": {**os.environ, "PYTHONPATH": before}, **sides}
    runs = max(repeats, 5)
    print(f"\nstart-up: wall time of the command, median of {runs} ({' and '.join(sides)} interleaved), and its "
          "peak RSS")
    print(f"{'command':<27} " + " ".join(f"{side + ' s':>9} {side + ' MB':>10}" for side in sides)
          + (f" {'ratio':>6}" if before else ""))
    samples = {(name, side): [] for name in commands for side in sides}
    for _ in range(runs):
        for name, command in commands.items():
            for side, env in sides.items():
                samples[(name, side)].append(peak_mb(command, env=env))
    for name in commands:
        seconds = {side: statistics.median(s for _, s in samples[(name, side)]) for side in sides}
        row = " ".join(f"{seconds[side]:>9.3f} {statistics.median(m for m, _ in samples[(name, side)]):>10.0f}"
                       for side in sides)
        print(f"{name:<27} {row}" + (f" {seconds['before'] / seconds['now']:>5.2f}x" if before else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25,50,100,200", help="input sizes in MB, comma-separated")
    parser.add_argument("--shapes", default="words,one-word", help="words and/or one-word")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (the median is shown)")
    parser.add_argument("--index-chunks", default="", help="index sizes to build and select over, comma-separated")
    parser.add_argument("--ann", default="ivf", help="the ANN kind of those indexes ('' for none)")
    parser.add_argument("--per-document", type=int, default=1, help="chunks of 40 words in each document "
                        "(1: a million documents for a million chunks; 100: files of 4 000 words)")
    parser.add_argument("--startup", action="store_true", help="measure the CLI's start-up")
    parser.add_argument("--before", default=None, help="start-up: a previous checkout laid out as installed "
                        "(meteora_edge/ with cli/ inside), measured side by side through PYTHONPATH")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(machine_header(("numpy", "faiss-cpu")))
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.startup:
        startup_table(args.repeats, args.before)
    if args.index_chunks:
        with tempfile.TemporaryDirectory(prefix="meteora-memory-", dir=os.environ.get("METEORA_BENCH_WORK")) as tmp:
            index_table([int(n) for n in args.index_chunks.split(",")], args.ann, args.per_document, args.repeats,
                        Path(tmp))
    if not sizes:
        return
    python = sys.executable
    base = statistics.median(peak_mb([python, "-c", _BASELINE])[0] for _ in range(args.repeats))
    print(f"baseline (interpreter + imports, no input): {base:.0f} MB peak RSS; medians of {args.repeats} runs\n")
    print("peak RSS in MB; 'x in' = peak / input size; 'x in-base' = (peak - baseline) / input size")
    print(f"{'shape':<9} {'input MB':>8} | {'chunk MB':>8} {'x in':>5} {'x in-base':>9} {'s':>5} | "
          f"{'index chunking MB':>17} {'x in':>5} {'x in-base':>9} {'s':>5}")
    with tempfile.TemporaryDirectory(prefix="meteora-memory-") as tmp:
        for shape in args.shapes.split(","):
            for size in sizes:
                source = Path(tmp) / f"{shape}-{size}.txt"
                write_input(source, size * MB, shape)
                chunk = [peak_mb([python, "-m", "meteora_edge.cli.main", "chunk", str(source), "-o",
                                  str(Path(tmp) / "out.json")]) for _ in range(args.repeats)]
                index = [peak_mb([python, "-c", _INDEX_CHUNKING, str(source)]) for _ in range(args.repeats)]
                c_mb, c_s = statistics.median(m for m, _ in chunk), statistics.median(s for _, s in chunk)
                i_mb, i_s = statistics.median(m for m, _ in index), statistics.median(s for _, s in index)
                print(f"{shape:<9} {size:>8} | {c_mb:>8.0f} {c_mb / size:>5.2f} {(c_mb - base) / size:>9.2f} {c_s:>5.1f} | "
                      f"{i_mb:>17.0f} {i_mb / size:>5.2f} {(i_mb - base) / size:>9.2f} {i_s:>5.1f}")
                source.unlink()


if __name__ == "__main__":
    main()
