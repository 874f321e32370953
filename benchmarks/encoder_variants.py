"""Evidence quality of each encoder variant of a bundle, judged by retrieval: `meteora-edge eval`
F1 on the dev data per method, against fp32, next to the variant's parity with torch (from the
manifest) and its embedding time per question.

A variant passes when no method's F1 falls more than --tolerance (0.01) below fp32's. With 50
questions one swapped sentence moves F1 by about 0.01, so read small differences as noise.

    python benchmarks/encoder_variants.py [--bundle models/bundles/default] [--level sentence] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dev_sets import HOTPOTQA, ROOT  # noqa: E402
from _machine import machine_header  # noqa: E402

METHODS = ("topk-cosine:2", "topk-cosine:3", "ecse", "ecse-window:1", "meve", "pipeline")


def evaluate(bundle: str, precision: str, args: argparse.Namespace, out: Path) -> dict:
    cli = [sys.executable, "-m", "meteora_edge.cli.main"]
    cmd = [*cli, "eval", "--data", args.data, "--level", args.level, "--bundle", bundle, "--precision", precision,
           "--no-cache", "--output", str(out), *(["--limit", str(args.limit)] if args.limit else [])]
    for method in args.methods.split(","):
        cmd += ["--method", method]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"eval with {precision} failed: {proc.stderr.strip()[-400:]}")
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", default=str(ROOT / "models" / "bundles" / "default"))
    parser.add_argument("--data", default=str(HOTPOTQA))
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    parser.add_argument("--level", choices=("sentence", "paragraph"), default="sentence")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from meteora_edge.models.bundle import Bundle
    from meteora_edge.models.precision import VARIANTS, choose_precision

    comp = Bundle.load(args.bundle).component("encoder")
    variants = [v for v in VARIANTS if v in comp.files]
    auto, why = choose_precision(variants)
    print(machine_header(("numpy", "onnxruntime", "meteora-edge")))
    print(f"bundle: {args.bundle} ({comp.source}); data: {Path(args.data).name}, {args.level} level; "
          f"auto here: {auto} ({why})\n")
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in variants:
            reports[variant] = evaluate(args.bundle, variant, args, Path(tmp) / f"{variant}.json")
    methods = args.methods.split(",")
    f1 = {v: {m["method"]: m["f1"] for m in r["methods"]} for v, r in reports.items()}
    base = f1.get("fp32")
    head = f"{'variant':<10} {'cos min':>8} {'cos mean':>9} {'ms/q':>6} " + " ".join(f"{m:>15}" for m in methods)
    print(head + "  verdict")
    print("-" * (len(head) + 9))
    for variant in variants:
        parity = comp.report.get(variant, {})
        cells, worst = [], 0.0
        for m in methods:
            delta = f1[variant][m] - base[m] if base else 0.0
            worst = min(worst, delta)
            cells.append(f"{f1[variant][m]:.3f} ({delta:+.3f})")
        verdict = "ok" if worst >= -args.tolerance else f"F1 down {-worst:.3f}"
        ms = reports[variant]["meta"]["embedding_ms_per_question"]
        print(f"{variant:<10} {parity.get('min_cosine', float('nan')):>8.4f} {parity.get('mean_cosine', float('nan')):>9.4f} "
              f"{ms:>6.0f} " + " ".join(f"{c:>15}" for c in cells) + f"  {verdict}")
    print(f"\ncos: the export's parity with torch ({comp.report.get('sentences', '?')} sentences); ms/q: embedding "
          f"one question and its candidates; F1 (difference to fp32); verdict: no method more than "
          f"{args.tolerance} below fp32")


if __name__ == "__main__":
    main()
