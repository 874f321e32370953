"""A folder of documents at 10k and 100k chunks: build throughput, then `select --index` latency per phase.

Usage: python benchmarks/folder.py --bundle models/bundles/default [--sizes 10000,100000] [--queries 40]
                                   [--distinct 10000] [--chunk-size 200] [--boundaries text|words]
                                   [--serve] [--work DIR]
       python benchmarks/folder.py --fast        # tiny sizes, the hashing encoder unless --bundle: a smoke run
       python benchmarks/folder.py --read /usr/share/doc [--include GLOB] [--exclude GLOB] [--repeat 3]
                                                 # a real folder read as index build reads it, no embedding
       python benchmarks/folder.py --index DIR --questions FILE [--bundle B] [--repeat 3]
                                                 # selects over an index already built from a real folder

The folder is generated: markdown files of a heading and paragraphs of real sentences (the
HotpotQA and ContractNLI dev contexts when /work/shared/data or ``--sentences`` holds them, else
synthetic sentences over a Zipf vocabulary), shuffled into new documents so no two chunks are
alike, and chunked as ``index build`` does (``--chunk-size``, default 200 words, and
``--boundaries``: ``text`` by default, ending chunks at paragraphs and sentences as index build does, or ``words`` windows). ``--distinct N`` caps the documents that
are embedded: past N chunks the folder holds copies of the first documents under other names
(the index stores and searches every copy; the embedding cache, in ``--work``, embeds each text
once) — building 100,000 distinct chunks with MiniLM on one thread takes hours, and a copy costs
a select what a new document does (kNN and BM25 run over every chunk). The header says how
many chunks were distinct.

Per size it prints the build (chunks, seconds, chunks/s), then ``select --index`` with every
default (SelectRuntime, as ``select`` and ``serve`` run it: k_init 50, hybrid scores, rule-written
rationales, cosine rung, BM25 fallback, dedup, 512 tokens) over ``--queries`` questions after a
warm-up: p50/p95 of the whole select and of each phase. numpy's BLAS runs on one thread, as the CLI's
``--threads 1`` holds it. The embedding cache lives in ``--work``: a second run with the same
``--work`` reads every vector back, so its build figures are not the encoder's. ``--serve`` also starts ``meteora-edge
serve`` over the index (one encoder thread) and sends the queries 8 at a time. The CPU, its
flags and the load average head the output, and the load is printed again at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _machine import machine_header, percentile, post_select  # noqa: E402

from meteora_edge.index.chunking import BOUNDARIES, DEFAULT_BOUNDARIES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data"
PHASES = ("candidates", "selection", "verify", "fallback", "prioritise", "budget")


def load_sentences(paths: list[Path]) -> tuple[list[str], list[str]]:
    """Sentences and questions from HotpotQA-layout files (contexts and questions)."""
    sentences, questions = [], []
    for path in paths:
        for item in json.loads(path.read_text(encoding="utf-8")):
            questions.append(item["question"])
            sentences += [s.strip() for group in item["context"]["sentences"] for s in group if len(s.split()) >= 4]
    return list(dict.fromkeys(sentences)), list(dict.fromkeys(questions))


def synthetic_sentences(n: int, seed: int = 3) -> tuple[list[str], list[str]]:
    """Sentences of 8-24 words over a Zipf vocabulary of pronounceable words, and 6-word questions."""
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "re", "tu", "sa", "ne", "vo", "di", "pe", "ra", "go", "li", "fu", "te"]
    vocab = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(5000)]
    weights = [1 / (rank + 1) ** 1.07 for rank in range(len(vocab))]
    sentences = [" ".join(rng.choices(vocab, weights, k=rng.randint(8, 24))).capitalize() + "." for _ in range(n)]
    questions = ["What " + " ".join(rng.choices(vocab, weights, k=5)) + "?" for _ in range(200)]
    return sentences, questions


def write_folder(folder: Path, chunks: int, distinct: int, sentences: list[str], *, chunk_size: int, boundaries: str,
                 seed: int = 5) -> tuple[int, int]:
    """Markdown documents (a heading, 3-6 paragraphs of 2-5 sentences) until ``chunks`` chunks; past
    ``distinct`` chunks, copies of the first documents. Returns (chunks, distinct chunks) as chunked."""
    from meteora_edge.index.chunking import chunk_text

    rng = random.Random(seed)
    folder.mkdir(parents=True)
    made, documents = 0, []
    while made < min(chunks, distinct):
        paragraphs = ["# " + " ".join(rng.choice(sentences).split()[:6]).rstrip(".,;:")]
        for _ in range(rng.randint(3, 6)):
            paragraphs.append(" ".join(rng.choice(sentences) for _ in range(rng.randint(2, 5))))
        text = "\n\n".join(paragraphs) + "\n"
        documents.append((text, len(chunk_text(text, chunk_size, boundaries=boundaries))))
        (folder / f"doc{len(documents):06d}.md").write_text(text, encoding="utf-8")
        made += documents[-1][1]
    unique, copy = made, 0
    while made < chunks:
        copy += 1
        for position, (text, count) in enumerate(documents):
            if made >= chunks:
                break
            (folder / f"copy{copy:03d}-doc{position + 1:06d}.md").write_text(text, encoding="utf-8")
            made += count
    return made, unique


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f} {five:.2f} {fifteen:.2f} over {os.cpu_count()} cores"


def row(name: str, values: list[float]) -> str:
    return f"  {name:<12} {percentile(values, 50):9.1f} {percentile(values, 95):9.1f}"


def serve_latency(bundle: str | None, index: Path, questions: list[str], concurrency: int) -> list[float]:
    """Per-request latency of ``serve`` over ``index`` with ``concurrency`` clients (after one warm-up)."""
    command = [sys.executable, "-m", "meteora_edge", "serve", "--port", "0", "--index", str(index), "--threads", "1"]
    command += ["--bundle", bundle] if bundle else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        port = int(server.stdout.readline().rsplit(":", 1)[1])  # type: ignore[union-attr]
        post_select(port, {"query": questions[0]})
        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(lambda q: post_select(port, {"query": q}), questions))
    finally:
        server.terminate()
        server.wait(timeout=30)


def time_selects(runtime: Any, index: Any, asked: list[str]) -> None:
    """Print p50/p95 of ``select --index`` (SelectRuntime, every default) and of each phase over ``asked``."""
    from meteora_edge.pipeline.request import SelectRequest

    runtime.indexes = {"folder": index}
    runtime.result(SelectRequest(query="warm up the encoder and the index"))
    totals: list[float] = []
    phases: dict[str, list[float]] = defaultdict(list)
    for question in asked:
        started = time.perf_counter()
        result = runtime.result(SelectRequest(query=question))
        totals.append((time.perf_counter() - started) * 1000)
        for phase in result.trace.phases:
            phases[phase.name].append(phase.ms)
    print(f"select --index, every default, one thread, {len(asked)} questions (ms):")
    print(f"  {'':<12} {'p50':>9} {'p95':>9}")
    print(row("select", totals))
    for name in PHASES:
        print(row(name, phases[name]))


def over_index(args: argparse.Namespace) -> None:
    """``--index``: time selects over an index already built (a real folder's), its questions from ``--questions``."""
    from meteora_edge.index.local_index import LocalIndex
    from meteora_edge.pipeline.runtime import SelectRuntime

    questions = [line.strip() for line in Path(args.questions).read_text(encoding="utf-8").splitlines() if line.strip()]
    index = LocalIndex.load(args.index)
    print(f"index: {args.index}, {len(index):,} chunks, encoder {index.encoder_id}; {len(questions)} questions "
          f"from {args.questions}, each asked {args.repeat} times")
    time_selects(SelectRuntime.load(args.bundle, threads=1), index, questions * args.repeat)


def measure(size: int, args: argparse.Namespace, sentences: list[str], questions: list[str], work: Path) -> None:
    from meteora_edge.index.corpus import read_documents
    from meteora_edge.index.local_index import LocalIndex
    from meteora_edge.pipeline.runtime import SelectRuntime

    folder, target = work / f"folder-{size}", work / f"index-{size}"
    for leftover in (folder, target):  # this script's own files from an interrupted run in the same --work
        shutil.rmtree(leftover, ignore_errors=True)
    chunks, unique = write_folder(folder, size, args.distinct or size, sentences, chunk_size=args.chunk_size,
                                  boundaries=args.boundaries)
    runtime = SelectRuntime.load(args.bundle, threads=1)
    found = read_documents([str(folder)])
    documents = found[0] if isinstance(found, tuple) else found
    started = time.perf_counter()
    index = LocalIndex.build(target, documents, runtime.encoder, bundle=args.bundle, chunk_size=args.chunk_size,
                             boundaries=args.boundaries)
    build = time.perf_counter() - started
    print(f"\n{len(index):,} chunks ({unique:,} distinct) from {len(documents):,} files: built in {build:.1f} s, "
          f"{len(index) / build:.0f} chunks/s ({unique / build:.0f} distinct chunks/s embedded)")
    asked = [questions[i % len(questions)] for i in range(args.queries)]
    time_selects(runtime, index, asked)
    if args.serve:
        latencies = serve_latency(args.bundle, target, asked, 8)
        print("serve, 8 concurrent clients, one encoder thread (ms):\n" + row("request", latencies))
    for made in (folder, target):
        shutil.rmtree(made)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", default=None, help="model bundle (MiniLM); without it the hashing encoder")
    parser.add_argument("--sizes", default="10000,100000", help="chunks per index, comma-separated")
    parser.add_argument("--distinct", type=int, default=10_000, help="at most this many distinct chunks (0: all)")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--chunk-size", type=int, default=200, help="words per chunk (index build's default: 200)")
    parser.add_argument("--boundaries", choices=BOUNDARIES, default=DEFAULT_BOUNDARIES,
                        help="where a chunk may end (index build's default: text)")
    parser.add_argument("--serve", action="store_true", help="also measure serve with 8 concurrent clients")
    parser.add_argument("--sentences", action="append", type=Path, default=None,
                        help="HotpotQA-layout JSON to take sentences and questions from (repeatable)")
    parser.add_argument("--work", default=None, help="folder for the generated files (default: a temporary one)")
    parser.add_argument("--fast", action="store_true", help="tiny sizes and 3 queries (a smoke run)")
    parser.add_argument("--read", default=None, metavar="FOLDER",
                        help="only read a real folder as index build does: files by type and skip reason, and the time")
    parser.add_argument("--include", action="append", default=[], help="with --read: index build's --include")
    parser.add_argument("--exclude", action="append", default=[], help="with --read: index build's --exclude")
    parser.add_argument("--max-file-size", type=int, default=None, help="with --read: index build's --max-file-size")
    parser.add_argument("--no-ignore-files", action="store_true", help="with --read: ignore .gitignore/.meteoraignore")
    parser.add_argument("--repeat", type=int, default=3, help="with --read: runs (the median is printed); with --index: "
                        "times each question is asked")
    parser.add_argument("--index", default=None, metavar="DIR", help="time selects over this index (give --questions, "
                        "and --bundle when it was built with one)")
    parser.add_argument("--questions", default=None, metavar="FILE", help="with --index: one question a line")
    args = parser.parse_args()
    if args.read:
        from _read_folder import read_folder

        from meteora_edge.fileio import MAX_INPUT_BYTES

        read_folder(args.read, include=args.include, exclude=args.exclude,
                    max_file_size=args.max_file_size or MAX_INPUT_BYTES, no_ignore_files=args.no_ignore_files,
                    repeat=args.repeat)
        return
    if args.index:
        if not args.questions:
            parser.error("--index needs --questions FILE")
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        print(machine_header(("numpy", "onnxruntime", "tokenizers")))
        print(load_line())
        from meteora_edge.errors import MeteoraError

        try:
            over_index(args)
        except (OSError, MeteoraError) as exc:
            sys.exit(f"Error: {exc}")
        print(f"\nend: {load_line()}")
        return
    if args.fast:
        args.sizes, args.queries, args.distinct = "60,150", 3, 100
    sources = args.sentences or [p for p in (DEV / "hotpotqa_distractor_dev50.json", DEV / "contractnli_dev.json")
                                 if p.exists()]
    sentences, questions = load_sentences(sources) if sources and not args.fast else synthetic_sentences(3000)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # one thread, as the CLI's --threads 1 holds it
    print(machine_header(("numpy", "onnxruntime", "tokenizers")))
    print(load_line())
    print(f"chunks: at most {args.chunk_size} words, boundaries {args.boundaries}")
    print(f"encoder: {args.bundle or 'hashing (no bundle)'}; text: "
          f"{', '.join(p.name for p in sources) if sources and not args.fast else 'synthetic sentences'}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="meteora-folder-"))
    os.environ["METEORA_EDGE_CACHE"] = str(work / "cache")  # the run's own embedding cache, not the user's
    try:
        for size in (int(s) for s in re.split(r"[,\s]+", args.sizes.strip()) if s):
            measure(size, args, sentences, questions, work)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nend: {load_line()}")


if __name__ == "__main__":
    main()
