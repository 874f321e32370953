"""Fusions of the dense cosine with BM25 and the learned sparse model, ranked per question, F1 of the top K.

Each question's candidates are ranked by standardised scores added up (the hybrid score's z-sum):
``cos+bm25`` (today's hybrid), ``cos+sparse`` (the sparse model as the lexical half), ``cos+bm25+sparse``
(both lexical scores, each standardised) and ``cos+(bm25+sparse)/2`` (their mean as the lexical half).
No selection, no cut: the ranking alone, as ``eval``'s fixed top-K baselines see it.

    python benchmarks/sparse_fusion.py --bundle BUNDLE_WITH_SPARSE_MODEL --data FILE.json [--level paragraph] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--level", default=None, choices=("sentence", "paragraph"))
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from meteora_edge.evaluation.datasets import load_questions
    from meteora_edge.evaluation.methods import CachedEncoder
    from meteora_edge.models.analyzer import analyzer_of
    from meteora_edge.models.bm25 import BM25Index
    from meteora_edge.models.encoders import embed
    from meteora_edge.models.onnx_encoder import load_encoder
    from meteora_edge.models.sparse_index import SparseIndex
    from meteora_edge.selection.stages import cosine_matrix, standardise

    encoder = CachedEncoder(load_encoder(args.bundle, threads=1))
    if not hasattr(encoder, "sparse_encoder"):
        raise SystemExit(f"{args.bundle} holds no sparse_encoder component")
    questions = load_questions(args.data, level=args.level, limit=args.limit)
    f1: dict[tuple[str, int], list[float]] = {}

    def z(x: np.ndarray) -> np.ndarray:
        return standardise(np.asarray(x, dtype=np.float64)[None, :])[0]

    for q in questions:
        dense = z(cosine_matrix(embed(encoder, [q.question]), embed(encoder, q.candidates))[0])
        bm25 = z(BM25Index.from_texts(q.candidates, analyzer=analyzer_of(encoder)).text_scores(q.question))
        sparse = z(SparseIndex.from_texts(q.candidates, encoder=encoder.sparse_encoder).text_scores(q.question))
        fusions = {"cos+bm25": dense + bm25, "cos+sparse": dense + sparse, "cos+bm25+sparse": dense + bm25 + sparse,
                   "cos+(bm25+sparse)/2": dense + (bm25 + sparse) / 2}
        for name, scores in fusions.items():
            order = np.lexsort((np.arange(len(scores)), -scores))
            for k in (1, 2, 3):
                hit = len(set(order[:k].tolist()) & q.gold)
                precision, recall = hit / k, hit / max(len(q.gold), 1)
                f1.setdefault((name, k), []).append(0.0 if not hit else 2 * precision * recall / (precision + recall))
    print(f"{Path(args.data).name} {args.level or ''} ({len(questions)} questions)")
    for name in ("cos+bm25", "cos+sparse", "cos+bm25+sparse", "cos+(bm25+sparse)/2"):
        print(f"  {name:22s}" + "  ".join(f"F1@{k} {np.mean(f1[(name, k)]):.3f}" for k in (1, 2, 3)))


if __name__ == "__main__":
    main()
