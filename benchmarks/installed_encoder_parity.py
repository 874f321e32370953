"""Parity of an installed encoder (``models install minilm-l6-v2``) against the exported fp32 model.

Embeds the first --sentences non-empty context sentences of each dev set with both bundles and
prints min / mean / 5th-percentile cosine per data set (the numbers the catalog entry quotes).

    python benchmarks/installed_encoder_parity.py --installed B1 --exported B2 [--sentences 500]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from meteora_edge.models.onnx_encoder import OnnxEncoder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SETS = ("hotpotqa_distractor_dev50.json", "contractnli_dev.json")


def sentences(path: Path, limit: int) -> list[str]:
    """The first ``limit`` distinct non-empty context sentences of a dev set, in file order."""
    seen: dict[str, None] = {}
    for item in json.loads(path.read_text(encoding="utf-8")):
        for group in item["context"]["sentences"]:
            for text in group:
                if text.strip():
                    seen.setdefault(text.strip(), None)
                if len(seen) >= limit:
                    return list(seen)
    return list(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--installed", required=True, help="bundle from models install")
    parser.add_argument("--exported", required=True, help="bundle from export encoder (fp32)")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--data", default=str(DATA))
    args = parser.parse_args()
    installed = OnnxEncoder.from_bundle(args.installed, cache=False)
    exported = OnnxEncoder.from_bundle(args.exported, precision="fp32", cache=False)
    print(f"installed: {installed.identity}; exported: {exported.identity}")
    print(f"{'data set':<34} {'n':>5} {'min':>8} {'p5':>8} {'mean':>8}")
    for name in SETS:
        texts = sentences(Path(args.data) / name, args.sentences)
        cosines = np.sum(installed.encode(texts) * exported.encode(texts), axis=1)
        print(f"{name:<34} {len(texts):>5} {cosines.min():8.4f} {np.percentile(cosines, 5):8.4f} {cosines.mean():8.4f}")


if __name__ == "__main__":
    main()
