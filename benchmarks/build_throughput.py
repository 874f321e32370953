"""Index-build throughput: the embedding loop `index build` ran before (input-order groups of 32,
the encoder's 8-text / 512-token batches) beside the loop it runs now (length order) and
variants of it (batch shapes, one session with N intra-op threads vs N one-thread sessions;
int8 variants now embed each text alone, see docs/performance.md; the encoder's in-memory
word-piece vectors for the token cover on and off),
side by side in one run, with the physical floor next to them.

The floor: MiniLM-L6 costs about 21 MFLOP per token (twice its 10.6 M non-embedding weights)
plus attention (4 × sequence × 384 per layer, 6 layers); the achieved GFLOP/s per core is
printed next to numpy's single-thread sgemm GFLOP/s on this machine, so the gap is visible.
Only real (unpadded) tokens are counted: padding is work the loop wasted.

Each mode embeds the same chunks (from --corpus, chunked as `index build` chunks them); modes
run in turn, --repeat times, and the median is quoted. Embeddings of every mode are compared
with the unbatched, unpadded ones (each chunk alone): the minimum cosine must stay >= 0.9999.

    python benchmarks/build_throughput.py [--bundle models/bundles/default] [--precision auto]
        [--corpus docs] [--chunks 48] [--chunk-size 200] [--threads 2] [--repeat 3] [--before-precision fp32]

``--before-precision fp32`` adds, as the first row (the ratios' base), the old loop with that
variant: what `index build` ran on a CPU where `auto` picked it before (AVX2 without VNNI ran
fp32 until int8-dot was measured there). Its min cos is against its own variant's vectors.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the sgemm reference is per core
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from _machine import machine_header  # noqa: E402

from meteora_edge.index.chunk_records import chunk_records, embed_batches  # noqa: E402
from meteora_edge.index.corpus import read_documents  # noqa: E402
from meteora_edge.models.encoders import embed, normalize_rows  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402
from meteora_edge.models.token_memo import TokenMemo  # noqa: E402

WEIGHT_FLOP = 2 * 10.6e6  # per token: a multiply-add per non-embedding weight
LAYERS, HIDDEN = 6, 384


def flop_per_token(seq: float) -> float:
    """MiniLM-L6's cost of one token in a sequence of ``seq`` tokens: weights plus attention (QK^T and AV)."""
    return WEIGHT_FLOP + LAYERS * 4 * seq * HIDDEN


def sgemm_gflops(n: int = 1024, repeat: int = 5) -> float:
    """numpy float32 matmul GFLOP/s on one thread (best of ``repeat``)."""
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    a @ a
    best = min(_timed(lambda: a @ a) for _ in range(repeat))
    return 2 * n**3 / best / 1e9


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def today_loop(encoder: OnnxEncoder, texts: list[str], group: int = 32) -> np.ndarray:
    """The loop before length ordering: input-order groups of ``group`` chunks (the CLI's --batch-size)."""
    parts = [embed(encoder, texts[lo : lo + group]) for lo in range(0, len(texts), group)]
    return normalize_rows(np.concatenate(parts)).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--corpus", default=str(ROOT / "docs"))
    parser.add_argument("--chunks", type=int, default=48)
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before-precision", default=None,
                        help="Also run the old loop with this variant, as the first row [none].")
    args = parser.parse_args()

    docs = read_documents([args.corpus], strict=False, on_skip=lambda path, reason: None)
    all_texts, _ = chunk_records(docs, 0, args.chunk_size, None)
    step = max(1, len(all_texts) // args.chunks)  # spread over the corpus: long chunks and documents' short tails
    texts = [all_texts[i] for i in range(0, len(all_texts), step)][: args.chunks]

    def encoder(threads: int, batch_size: int = 8, max_batch_tokens: int = 512, *, sessions: int = 1,
                isolate: bool | None = None, precision: str | None = None) -> OnnxEncoder:
        enc = OnnxEncoder.from_bundle(args.bundle, threads=threads, precision=precision or args.precision,
                                      cache=False, sessions=sessions)
        enc.batch_size, enc.max_batch_tokens = batch_size, max_batch_tokens
        if isolate is not None:
            enc.isolate_texts = isolate
        enc.encode(["warm up"])
        return enc

    T = args.threads
    base = encoder(T, isolate=False)  # what every variant ran before: batched
    lengths = [len(e.ids) for e in base._tokenizer.encode_batch(texts)]
    tokens, mean_seq = sum(lengths), statistics.fmean(lengths)
    build = encoder(1, sessions=T)  # what `index build --threads T` runs now
    forgetful = encoder(1, sessions=T)  # the same, keeping no word-piece vectors for the token cover
    forgetful.token_memo = TokenMemo(0)
    one_session = encoder(T)
    wide = encoder(T, 64, 8192, isolate=False)
    alone_now = "each text alone" if build.isolate_texts else "batched"
    modes: dict[str, Callable[[], np.ndarray]] = {}
    references: dict[str, np.ndarray] = {}
    if args.before_precision:
        old = encoder(T, isolate=False, precision=args.before_precision)
        name = f"before, {args.before_precision}: input order, batched 8 x 512 tok, 1 session x {T} thr"
        modes[name] = lambda: today_loop(old, texts)
        references[name] = np.concatenate([old.encode([t]) for t in texts])
    modes |= {
        f"before: input order, batched 8 x 512 tok, 1 session x {T} thr": lambda: today_loop(base, texts),
        f"index build now: length order, {alone_now}, {T} sessions x 1 thr": lambda: embed_batches(build, texts, 32, None),
        "the same, no word-piece memory (token_memo_bytes 0)": lambda: embed_batches(forgetful, texts, 32, None),
        f"length order, {alone_now}, 1 session x {T} thr": lambda: embed_batches(one_session, texts, 32, None),
        f"length order, batched 64 x 8192 tok, 1 session x {T} thr": lambda: embed_batches(wide, texts, 64, None),
    }
    alone = np.concatenate([base.encode([t]) for t in texts])  # unbatched, unpadded
    times: dict[str, list[float]] = {m: [] for m in modes}
    worst: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, run in modes.items():
            start = time.perf_counter()
            vectors = run()
            times[name].append(time.perf_counter() - start)
            reference = references.get(name, alone)
            worst[name] = min(worst.get(name, 1.0), float((vectors * reference).sum(axis=1).min()))

    floor = sgemm_gflops()
    print(machine_header(("numpy", "onnxruntime", "tokenizers")))
    print(f"encoder: {base.identity} ({(base.precision_choice or {}).get('reason', '')})")
    print(f"chunks: {len(texts)} from {args.corpus} (chunk size {args.chunk_size} words), {tokens} tokens, "
          f"mean {mean_seq:.0f} per chunk (max_length {base.max_length}); load average {os.getloadavg()[0]:.1f}")
    print(f"floor: {flop_per_token(mean_seq) / 1e6:.1f} MFLOP per token at this length; numpy sgemm "
          f"{floor:.1f} GFLOP/s on one core\n")
    head = f"{'mode':<70} {'chunks/s':>8} {'ratio':>6} {'tok/s':>7} {'GFLOP/s/core':>12} {'of sgemm':>8} {'min cos':>8}"
    print(head)
    print("-" * len(head))
    first = None
    for name in modes:
        median = statistics.median(times[name])
        rate = len(texts) / median
        first = first or rate
        per_core = tokens / median * flop_per_token(mean_seq) / T / 1e9
        print(f"{name:<70} {rate:>8.2f} {rate / first:>5.2f}x {tokens / median:>7.0f} {per_core:>12.1f} "
              f"{per_core / floor:>7.0%} {worst[name]:>8.5f}")
    print(f"\nmedian of {args.repeat} runs per mode, modes interleaved; min cos: against each chunk embedded alone "
          "(no padding); 'of sgemm': achieved GFLOP/s per core over numpy's one-thread sgemm")


if __name__ == "__main__":
    main()
