"""The pipeline at scale: the local index (exact and ANN) and Milvus Lite side by side.

Usage: python benchmarks/scale.py [--chunks 100000,1000000] [--milvus-chunks 100000] [--queries 50]
                                  [--ann ivf,hnsw] [--names] [--work DIR]

Corpus: ``benchmarks/pipeline.py``'s synthetic Zipf corpus (20 000-word vocabulary, 40 words a
chunk), embedded with the model-free **hashing encoder** (384 dimensions: real text-like
vectors with word overlap, not random unit vectors). Queries: 5 words drawn from a random chunk.
The corpus is lower case, so the rule-written rationales find no names and no second hop runs;
``--names`` capitalises every fifth vocabulary word (``W5``, ``W10`` …: the same vectors and
BM25, which lower-case) so that names appear and the second-hop retrieval (another kNN and
BM25 per query) is measured too.

For the local index it prints build time, disk size, peak and resident memory, then for each
kNN mode (exact, and each ``--ann`` kind) the pipeline's latency without an LLM (the CLI's
``select --index`` defaults without a bundle: k_init 50, hybrid scoring, rule-written
rationales with a second hop, cosine rung, BM25 fallback, theta 0.85, 512 tokens), p50/p95 per phase
and per index call, the recall of ANN kNN against exact kNN, and how often the ANN pipeline
selects the same passages as the exact one. Milvus Lite gets the same measurements at
``--milvus-chunks`` (it is pure Python; see docs/scale.md for the sizes it handles). Everything
is written under ``--work`` (default: a temporary folder under /tmp) and removed at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header, percentile  # noqa: E402
from pipeline import queries_from, synthetic_corpus  # noqa: E402

from meteora_edge import EvidencePipeline, HashingEncoder, LocalIndex, PipelineConfig  # noqa: E402
from meteora_edge.index.ann_index import AnnConfig, AnnIndex, ann_entry, build_ann  # noqa: E402
from meteora_edge.index.corpus import SourceDocument  # noqa: E402

CONFIG = PipelineConfig(verification="cosine")  # what `select --index` runs without a bundle or cross-encoder
CALLS = ("search", "bm25_search", "lexical_scores", "vectors_for", "records")
NAME = re.compile(r"\bw(\d+)\b")


def rss_gb(field: str = "VmRSS") -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1e6
    return float("nan")


def reset_peak() -> None:
    """Make VmHWM (peak resident memory) start again from the current RSS (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        pass


def folder_gb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e9


class Timed:
    """Wraps an index and times each call the pipeline makes (the same CorpusIndex calls)."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.ms: dict[str, float] = defaultdict(float)
        self.encoder_id = index.encoder_id

    def __len__(self) -> int:
        return len(self.index)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.index, name)
        if name not in CALLS:
            return method

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.ms[name] += (time.perf_counter() - t0) * 1000

        return timed


def run_pipeline(index: Any, encoder: Any, queries: Sequence[str]) -> tuple[dict[str, list[float]], list[list[int]]]:
    """Per-phase, per-call and total latencies (ms) over ``queries``, and each query's passage ids."""
    timed = Timed(index)
    pipe = EvidencePipeline(CONFIG, encoder=encoder, index=timed)
    pipe.run(queries[0])  # warm-up
    samples: dict[str, list[float]] = defaultdict(list)
    chosen = []
    for q in queries:
        timed.ms.clear()
        t0 = time.perf_counter()
        result = pipe.run(q)
        samples["total"].append((time.perf_counter() - t0) * 1000)
        selection = next(p for p in result.trace.phases if p.name == "selection")
        # every rule-written rationale other than the question retrieves for itself (kNN + BM25)
        samples["second hops"].append(any(r.get("label") != "question" for r in selection.details["rationales"]))
        for phase in result.trace.phases:
            samples[phase.name].append(phase.ms)
        for call in CALLS:
            samples[f"  {call}"].append(timed.ms.get(call, 0.0))
        chosen.append(list(result.ids))
    return samples, chosen


def print_latency(title: str, samples: dict[str, list[float]]) -> None:
    hops = samples.pop("second hops", [])
    print(f"\n{title}; a second-hop retrieval ran for {sum(hops)} of {len(hops)} queries")
    print(f"  {'phase / index call':<22} {'p50':>9} {'p95':>9}")
    order = ["candidates", "selection", "verify", "fallback", "prioritise", "budget", "total"]
    for name in order + [f"  {c}" for c in CALLS]:
        if name in samples:
            values = samples[name]
            print(f"  {name:<22} {percentile(values, 50):9.2f} {percentile(values, 95):9.2f}")


def bm25_latency(index: Any, queries: Sequence[str]) -> tuple[float, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        index.bm25_search(q, 10)
        times.append((time.perf_counter() - t0) * 1000)
    return percentile(times, 50), percentile(times, 95)


def recall(index: LocalIndex, encoder: Any, queries: Sequence[str], k: int) -> tuple[float, float]:
    """ANN kNN against exact kNN: (share of the exact top-k ids found, share of returned chunks whose
    exact cosine reaches the exact k-th score — ties at the k-th score count as hits)."""
    by_id, by_score = [], []
    for q in queries:
        v = encoder.encode([q])[0]
        ids, scores = index.search(v, k, exact=False)
        exact_ids, exact_scores = index.search(v, k, exact=True)
        by_id.append(len(set(ids.tolist()) & set(exact_ids.tolist())) / len(exact_ids))
        by_score.append(float(np.mean(scores >= exact_scores[-1] - 1e-6)))
    return float(np.mean(by_id)), float(np.mean(by_score))


def local_part(args: argparse.Namespace, corpus: list[str], queries: list[str], encoder: Any, work: Path) -> None:
    docs = [SourceDocument(str(i), text, {}) for i, text in enumerate(corpus)]
    kinds = [k for k in args.ann.split(",") if k]
    reset_peak()
    t0 = time.perf_counter()
    first = AnnConfig(kind=kinds[0]) if kinds else None
    LocalIndex.build(work / "local", docs, encoder, chunk_size=64, overlap=0, batch_size=1024, ann=first)
    build_s = time.perf_counter() - t0
    build_peak = rss_gb("VmHWM")
    del docs
    t0 = time.perf_counter()
    index = LocalIndex.load(work / "local", encoder=encoder)
    load_s = time.perf_counter() - t0
    info = index.info()
    ann_bytes = index.manifest["files"]["ann.faiss"]["size"] if first else 0
    print(f"\nlocal index: {len(index):,} chunks; build {build_s:.0f} s (embedding, BM25, {kinds[0] + ' ' if first else ''}"
          f"ANN, writing); disk {info['bytes'] / 1e9:.2f} GB (of which ANN {ann_bytes / 1e9:.2f} GB); peak RSS during "
          f"build {build_peak:.1f} GB; load with sha256 checks {load_s:.1f} s; RSS after load {rss_gb():.2f} GB")
    structures: dict[str, AnnIndex | None] = {"exact": None}
    if first:
        structures[kinds[0]] = index.ann
    for kind in kinds[1:]:  # further kinds: the structure alone, over the same vectors
        entry = ann_entry(AnnConfig(kind=kind), len(index))
        reset_peak()
        t0 = time.perf_counter()
        data = build_ann(np.asarray(index.vectors), entry)
        print(f"  {kind} structure ({entry['factory']}, probe {entry['probe']}): built in "
              f"{time.perf_counter() - t0:.0f} s, {len(data) / 1e9:.2f} GB, peak RSS {rss_gb('VmHWM'):.1f} GB")
        structures[kind] = AnnIndex(data, entry, count=len(index), dimension=index.vectors.shape[1], where=kind)
        del data
    if first:
        print(f"  {kinds[0]} structure: {index.manifest['ann']['factory']}, probe {index.manifest['ann']['probe']}")
    chosen: dict[str, list[list[int]]] = {}
    for name, structure in structures.items():
        index.ann = structure
        reset_peak()
        samples, chosen[name] = run_pipeline(index, encoder, queries)
        print_latency(f"local index, kNN {name}: pipeline latency over {len(queries)} queries (ms, no LLM); "
                      f"peak RSS {rss_gb('VmHWM'):.2f} GB", samples)
        if structure is not None:
            for k in (10, CONFIG.k_init):
                ids_recall, score_recall = recall(index, encoder, queries, k)
                print(f"  recall@{k} vs exact: {ids_recall:.3f} of the exact ids, {score_recall:.3f} counting ties")
            same = np.mean([a == b for a, b in zip(chosen[name], chosen["exact"])])
            print(f"  the pipeline selects the same passages as with exact kNN for {same:.0%} of the queries")
    p50, p95 = bm25_latency(index, queries)
    print(f"\nlocal BM25 top-10 over {len(index):,} chunks (the fallback's search): p50 {p50:.2f} ms, p95 {p95:.2f} ms")


def milvus_part(args: argparse.Namespace, corpus: list[str], queries: list[str], encoder: Any, work: Path) -> None:
    import logging

    from meteora_edge.index.milvus_index import MilvusIndex
    from meteora_edge.index.milvus_location import milvus_location

    logging.getLogger("pymilvus").setLevel(logging.ERROR)
    n = min(args.milvus_chunks, len(corpus))
    docs = [SourceDocument(str(i), text, {}) for i, text in enumerate(corpus[:n])]
    location = milvus_location(str(work / "lite.db"), "scale")
    reset_peak()
    t0 = time.perf_counter()
    index = MilvusIndex.build(location, docs, encoder, chunk_size=64, overlap=0, batch_size=1024)
    build_s = time.perf_counter() - t0
    print(f"\nMilvus Lite: {len(index):,} chunks; build {build_s:.0f} s (embedding, insert, flush, indexes); disk "
          f"{folder_gb(work / 'lite.db'):.2f} GB; peak RSS during build {rss_gb('VmHWM'):.1f} GB (engine in-process)")
    reset_peak()
    samples, _ = run_pipeline(index, encoder, queries)
    print_latency(f"Milvus Lite: pipeline latency over {len(queries)} queries (ms, no LLM); peak RSS "
                  f"{rss_gb('VmHWM'):.2f} GB", samples)
    p50, p95 = bm25_latency(index, queries)
    print(f"\nMilvus Lite full-text BM25 top-10 over {len(index):,} chunks (the fallback's search): p50 {p50:.2f} ms, "
          f"p95 {p95:.2f} ms")
    index.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", default="100000,1000000", help="local index sizes, comma-separated")
    parser.add_argument("--milvus-chunks", type=int, default=100_000, help="0 skips Milvus Lite")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--ann", default="ivf,hnsw", help="ANN kinds for the local index, comma-separated ('' for none)")
    parser.add_argument("--names", action="store_true", help="capitalise every fifth word so the second hop runs")
    parser.add_argument("--work", default=None, help="scratch folder (removed at the end) [a temporary folder]")
    args = parser.parse_args()

    print(machine_header(("numpy", "faiss-cpu", "pymilvus", "milvus-lite")))
    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; load average "
          f"{os.getloadavg()[0]:.1f}")
    sizes = [int(n) for n in args.chunks.split(",")]
    print(f"corpus: up to {max(sizes):,} synthetic Zipf chunks of 40 words, hashing encoder (384 dims); "
          f"{args.queries} queries of 5 words; pipeline k_init {CONFIG.k_init}, scoring {CONFIG.scoring}, "
          f"rationales {CONFIG.rationales}, rung cosine tau {CONFIG.tau_relevance}, n_min {CONFIG.n_min}")
    encoder = HashingEncoder()
    corpus = synthetic_corpus(max(sizes + [args.milvus_chunks]))
    if args.names:
        corpus = [NAME.sub(lambda m: m.group(0).upper() if int(m.group(1)) % 5 == 0 else m.group(0), t) for t in corpus]
    queries = queries_from(corpus, args.queries)
    print(f"RSS with the corpus strings in memory (the baseline of every RSS below): {rss_gb():.2f} GB")
    work = Path(tempfile.mkdtemp(prefix="meteora-scale-", dir=args.work))
    try:
        for n in sizes:
            local_part(args, corpus[:n], queries, encoder, work)
            shutil.rmtree(work / "local", ignore_errors=True)
        if args.milvus_chunks:
            milvus_part(args, corpus, queries, encoder, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
