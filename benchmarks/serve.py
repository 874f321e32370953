"""What `serve` saves: a select over HTTP (models loaded once) against a `select` process per query.

Usage: python benchmarks/serve.py --bundle B --index I [--queries 30] [--cli-runs 5]

Starts `meteora-edge serve --port 0` with the bundle and index, sends the same queries one at
a time and then two at a time (the server's default --workers 2), and runs `meteora-edge
select --index` as a fresh process for some of them; prints medians and p95 per path.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header, percentile, post_select  # noqa: E402

QUERIES = ["How much notice is needed to end the agreement?", "Who owns the confidential information?",
           "When are the fees due?", "What happens on termination?", "How does the agreement renew?",
           "What is the liability cap?"]


def row(name: str, values: list[float]) -> str:
    return f"  {name:<34} {percentile(values, 50):9.1f} {percentile(values, 95):9.1f}   (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--index", required=True)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--cli-runs", type=int, default=5)
    args = parser.parse_args()
    print(machine_header(("numpy", "onnxruntime", "starlette", "uvicorn")))
    cli = [sys.executable, "-m", "meteora_edge"]
    started = time.perf_counter()
    server = subprocess.Popen([*cli, "serve", "--port", "0", "--bundle", args.bundle, "--index", args.index],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        print(f"server start (models and index loaded, listening): {(time.perf_counter() - started) * 1000:.0f} ms")
        bodies = [{"query": QUERIES[i % len(QUERIES)], "k_init": 20, "t_max": 300} for i in range(args.queries)]
        post_select(port, bodies[0])  # warm-up
        sequential = [post_select(port, b) for b in bodies]
        with ThreadPoolExecutor(2) as pool:
            t0 = time.perf_counter()
            parallel = list(pool.map(lambda b: post_select(port, b), bodies))
            wall = time.perf_counter() - t0
        processes = []
        for body in bodies[: args.cli_runs]:
            t0 = time.perf_counter()
            subprocess.run([*cli, "select", "--bundle", args.bundle, "--index", args.index, "-q", body["query"],
                            "--k-init", "20", "--t-max", "300"], check=True, capture_output=True)
            processes.append((time.perf_counter() - t0) * 1000)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"select latency (ms), {args.queries} queries, k_init 20, t_max 300:")
    print(f"  {'path':<34} {'p50':>9} {'p95':>9}")
    print(row("HTTP, one at a time", sequential))
    print(row("HTTP, two clients (--workers 2)", parallel))
    print(row("a select process per query", processes))
    print(f"throughput: one at a time {1000 * len(sequential) / sum(sequential):.1f}/s, "
          f"two clients {len(parallel) / wall:.1f}/s; per-query speed-up over a process: "
          f"{percentile(processes, 50) / percentile(sequential, 50):.0f}x (p50)")


if __name__ == "__main__":
    main()
