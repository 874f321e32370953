"""What the learned sparse model (SPLADE) costs: a select of 40 candidates and an index build's
encoding, with BM25 as the lexical scorer and with the sparse model — one run, side by side, one thread.

* ``select``: each HotpotQA dev question with 40 candidate sentences (its own context, topped up
  from the next questions' when it has fewer), ``select``'s settings for given passages, the
  embedding cache off (every candidate embedded each time); the two lexical scorers alternate
  per question, so load on a shared machine falls on both alike. Reported: median and p90 ms.
* ``encode``: the chunks an index build embeds (each question's paragraphs): MiniLM's dense
  vectors vs the sparse model's vectors, texts per second; and the sparse graph cut at its
  encoder's output (``last_hidden_state``, with ``onnx.utils.extract_model``) vs run to ``sparse``:
  the share of the vocabulary head (``hidden × vocab`` per token, then the max over tokens).

    python benchmarks/sparse_cost.py --bundle BUNDLE_WITH_SPARSE_MODEL [--queries 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _dev_sets import HOTPOTQA, sentence_pools
from _machine import machine_header, percentile

ROOT = Path(__file__).resolve().parents[1]


def paragraphs(path: Path) -> list[str]:
    items = json.loads(path.read_text(encoding="utf-8"))
    return [" ".join(s.strip() for s in group) for item in items for group in item["context"]["sentences"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", required=True, help="a bundle with an encoder and a sparse_encoder component")
    parser.add_argument("--data", default=str(HOTPOTQA))
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=200, help="paragraphs encoded for the index-build figures")
    args = parser.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    sys.path.insert(0, str(ROOT))
    from meteora_edge.models.onnx_encoder import load_encoder
    from meteora_edge.models.onnx_session import create_session, feed_for, pad_encodings, tokenize_batch
    from meteora_edge.models.sparse_index import sparse_encoder_of
    from meteora_edge.pipeline.config import select_config
    from meteora_edge.pipeline.engine import EvidencePipeline

    print(machine_header(("numpy", "onnxruntime", "tokenizers")))
    encoder = load_encoder(args.bundle, threads=1, cache=False)
    sparse = sparse_encoder_of(encoder)
    if sparse is None:
        raise SystemExit(f"{args.bundle} holds no sparse_encoder component")
    questions = sentence_pools(args.data, 40, args.queries)
    timings: dict[str, list[float]] = {"bm25": [], "sparse": []}
    for n, (question, passages) in enumerate([questions[0], *questions]):
        for scorer in ("bm25", "sparse") if n % 2 else ("sparse", "bm25"):
            config = select_config({"lexical_scorer": scorer}, from_index=False, chunks=passages)
            t0 = time.perf_counter()
            EvidencePipeline(config, encoder=encoder).run(question, passages=passages)
            if n:  # the first question warms both paths up
                timings[scorer].append((time.perf_counter() - t0) * 1000)
    print(f"\nselect, 40 candidates, {len(questions)} questions, 1 thread (ms)")
    print(f"{'lexical scorer':<16}{'p50':>10}{'p90':>10}")
    for scorer, values in timings.items():
        print(f"{scorer:<16}{statistics.median(values):>10.1f}{percentile(values, 90):>10.1f}")
    ratio = statistics.median(timings["sparse"]) / statistics.median(timings["bm25"])
    print(f"sparse / bm25 median: {ratio:.2f}x")

    chunks = paragraphs(Path(args.data))[: args.chunks]
    words = sum(len(c.split()) for c in chunks)
    dense_runs, sparse_runs = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        encoder.encode(chunks)
        dense_runs.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sparse.encode_sparse(chunks)
        sparse_runs.append(time.perf_counter() - t0)
    print(f"\nindex-build encoding: {len(chunks)} paragraphs ({words / len(chunks):.0f} words each), median of 3")
    print(f"{'model':<34}{'chunks/s':>10}{'s':>8}")
    print(f"{'dense (MiniLM, ' + encoder_precision(encoder) + ')':<34}{len(chunks) / statistics.median(dense_runs):>10.1f}"
          f"{statistics.median(dense_runs):>8.2f}")
    print(f"{'sparse (SPLADE, fp32)':<34}{len(chunks) / statistics.median(sparse_runs):>10.1f}"
          f"{statistics.median(sparse_runs):>8.2f}")
    import tempfile

    import onnx.utils  # the onnx extra; cuts the graph at the encoder's output (onnxruntime runs every node of a graph)

    with tempfile.TemporaryDirectory() as folder:
        body_path = Path(folder) / "body.onnx"
        onnx.utils.extract_model(str(sparse.model_path), str(body_path),
                                 ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state"])
        sessions = {"last_hidden_state": create_session(body_path, threads=1),
                    "sparse": create_session(sparse.model_path, threads=1)}
        encodings = tokenize_batch(sparse._tokenizer, chunks)
        batches = [encodings[i:i + 4] for i in range(0, len(encodings), 4)]
        spent = {"last_hidden_state": [], "sparse": []}  # type: dict[str, list[float]]
        for _ in range(3):
            for output, session in sessions.items():
                t0 = time.perf_counter()
                for batch in batches:
                    ids, mask = pad_encodings(batch)
                    session.run([output], feed_for(session, {"input_ids": ids, "attention_mask": mask}))
                spent[output].append(time.perf_counter() - t0)
    body, whole = statistics.median(spent["last_hidden_state"]), statistics.median(spent["sparse"])
    print(f"sparse graph: encoder alone {body:.2f} s, with the vocabulary head {whole:.2f} s "
          f"(the head: {100 * (whole - body) / whole:.0f}% of the time)")


def encoder_precision(encoder: object) -> str:
    choice = getattr(encoder, "precision_choice", None)
    return choice["precision"] if choice else "?"


if __name__ == "__main__":
    main()
