"""Pipeline latency at 100k chunks, index build time and size, BM25 vs rank-bm25.

Usage: python benchmarks/pipeline.py [--chunks 100000] [--queries 50] [--bundle B]

Builds a synthetic index (Zipf-distributed vocabulary, ~40 words a chunk) with the hashing
encoder (or an ONNX bundle), runs the pipeline without an LLM, and prints per-phase and
total latency (p50/p95) with the token cover on (the default), off, and walking from z 1
instead of 0.5, alternating query by query (with the hashing encoder it has no word
pieces and does not run), then times BM25 queries here
and with rank-bm25 on the same corpus.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header, percentile  # noqa: E402

from meteora_edge import EvidencePipeline, HashingEncoder, LocalIndex, PipelineConfig  # noqa: E402
from meteora_edge.models.bm25 import bm25_tokens  # noqa: E402
from meteora_edge.index.corpus import SourceDocument  # noqa: E402


def synthetic_corpus(n_chunks: int, words_per_chunk: int = 40, vocab: int = 20_000, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab + 1)
    probs = 1.0 / ranks**1.07
    probs /= probs.sum()
    words = np.array([f"w{i}" for i in range(vocab)])
    draws = rng.choice(vocab, size=(n_chunks, words_per_chunk), p=probs)
    return [" ".join(words[row]) for row in draws]


def queries_from(corpus: list[str], n: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.choice(len(corpus), size=n, replace=False):
        toks = corpus[int(i)].split()
        out.append(" ".join(rng.choice(toks, size=5, replace=False)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rank-bm25-queries", type=int, default=10)
    parser.add_argument("--bundle", default=None)
    args = parser.parse_args()

    print(machine_header(("numpy", "rank-bm25", "onnxruntime")))
    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    corpus = synthetic_corpus(args.chunks)
    if args.bundle:
        from meteora_edge.models.onnx_encoder import OnnxEncoder

        encoder = OnnxEncoder.from_bundle(args.bundle, threads=1)
    else:
        encoder = HashingEncoder()
    work = Path(tempfile.mkdtemp(prefix="meteora-bench-"))
    try:
        docs = [SourceDocument(str(i), text, {}) for i, text in enumerate(corpus)]
        t0 = time.perf_counter()
        index = LocalIndex.build(work / "ix", docs, encoder, chunk_size=64, overlap=0, batch_size=256)
        build_s = time.perf_counter() - t0
        size_mb = index.info()["bytes"] / 1e6
        t0 = time.perf_counter()
        index = LocalIndex.load(work / "ix", encoder=encoder)
        load_full = time.perf_counter() - t0
        t0 = time.perf_counter()
        LocalIndex.load(work / "ix", encoder=encoder, verify=False)
        load_fast = time.perf_counter() - t0
        print(f"\nindex: {len(index)} chunks, encoder {index.encoder_id}; build {build_s:.1f} s; size {size_mb:.1f} MB; "
              f"load {load_full * 1000:.0f} ms with sha256 checks, {load_fast * 1000:.0f} ms without")

        settings = {"k_init": 20, "tau_relevance": 0.3, "n_min": 3, "theta_redundancy": 0.85, "t_max": 512}
        pipes = {"token cover on": EvidencePipeline(PipelineConfig(**settings), encoder=encoder, index=index),
                 "token cover off": EvidencePipeline(PipelineConfig(**settings, token_cover=None), encoder=encoder,
                                                     index=index),
                 "cover walk z 1": EvidencePipeline(PipelineConfig(**settings, token_cover_z=1.0), encoder=encoder,
                                                    index=index)}
        queries = queries_from(corpus, args.queries)
        phases: dict[str, dict[str, list[float]]] = {name: {} for name in pipes}
        totals: dict[str, list[float]] = {name: [] for name in pipes}
        for pipe in pipes.values():
            pipe.run(queries[0])  # warm-up
        for q in queries:
            for name, pipe in pipes.items():
                t0 = time.perf_counter()
                result = pipe.run(q)
                totals[name].append((time.perf_counter() - t0) * 1000)
                for p in result.trace.phases:
                    phases[name].setdefault(p.name, []).append(p.ms)
        print(f"\npipeline latency over {len(queries)} queries (ms, no LLM, k_init 20, cosine rung), p50 / p95:")
        print(f"  {'phase':<12}" + "".join(f"{name:>22}" for name in pipes))
        for phase in phases["token cover on"]:
            print(f"  {phase:<12}" + "".join(f"{percentile(phases[n][phase], 50):12.2f} / {percentile(phases[n][phase], 95):7.2f}"
                                             for n in pipes))
        print(f"  {'total':<12}" + "".join(f"{percentile(totals[n], 50):12.2f} / {percentile(totals[n], 95):7.2f}"
                                         for n in pipes))
        on, off, shallow = (statistics.median(totals[n]) for n in pipes)
        print(f"  token cover on / off (p50): {on / off:.2f}x; its walk from z 0.5 (the default) / from z 1: "
              f"{on / shallow:.2f}x")

        ours = []
        for q in queries:
            t0 = time.perf_counter()
            index.bm25_search(q, 10)
            ours.append((time.perf_counter() - t0) * 1000)
        from rank_bm25 import BM25Okapi

        tokenized = [bm25_tokens(t) for t in corpus]
        t0 = time.perf_counter()
        reference = BM25Okapi(tokenized)
        ref_build = time.perf_counter() - t0
        theirs = []
        for q in queries[: args.rank_bm25_queries]:
            t0 = time.perf_counter()
            scores = reference.get_scores(bm25_tokens(q))
            np.argsort(-scores)[:10]
            theirs.append((time.perf_counter() - t0) * 1000)
        ours_p50, theirs_p50 = statistics.median(ours), statistics.median(theirs)
        print(f"\nBM25 top-10 query at {len(corpus)} chunks (ms):")
        print(f"  {'engine':<24} {'p50':>9} {'p95':>9}")
        print(f"  {'meteora-edge (numpy)':<24} {ours_p50:9.3f} {percentile(ours, 95):9.3f}")
        print(f"  {'rank-bm25 BM25Okapi':<24} {theirs_p50:9.3f} {percentile(theirs, 95):9.3f}   (build {ref_build:.1f} s)")
        print(f"  speed-up (p50): {theirs_p50 / ours_p50:.0f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
