"""One pipeline object shared by 8 threads gives what sequential calls give; import changes nothing global."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from meteora_edge import EvidencePipeline, HashingEncoder, MeteoraReranker, PipelineConfig
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

TEXTS = [f"clause {i}: party {'may' if i % 3 else 'shall'} terminate after {i} days notice about topic {i % 7}"
         for i in range(60)]
QUERIES = [f"terminate notice topic {i % 7} after {i} days" for i in range(40)]


def _signature(result):
    return json.dumps({"ids": result.ids, "passages": result.passages, "tokens": result.tokens})


def test_pipeline_over_an_index_from_8_threads_matches_sequential(tmp_path):
    enc = HashingEncoder()
    index = LocalIndex.build(tmp_path / "ix", [SourceDocument(str(i), t, {}) for i, t in enumerate(TEXTS)], enc,
                             chunk_size=12, overlap=0)
    pipe = EvidencePipeline(PipelineConfig(k_init=10, t_max=60, tau_relevance=0.2), encoder=enc, index=index)
    sequential = [_signature(pipe.run(q)) for q in QUERIES]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda q: _signature(pipe.run(q)), QUERIES * 3))
    assert threaded == sequential * 3


def test_reranker_with_verifier_from_8_threads_matches_sequential():
    calls = []

    def verifier(request):
        calls.append(request.chunk_index)
        return {"relevant": "shall" not in request.chunk, "flagged": False}

    reranker = MeteoraReranker(HashingEncoder(), verifier=verifier, expansion_window=1)
    sequential = [reranker.trace(q, TEXTS).indices for q in QUERIES]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda q: reranker.trace(q, TEXTS).indices, QUERIES))
    assert threaded == sequential
    assert len(calls) > len(QUERIES)


def test_import_mutates_no_global_state():
    code = (
        "import logging, os, sys, warnings\n"
        "import numpy as np\n"
        "before = (dict(os.environ), list(logging.root.handlers), logging.root.level, np.geterr(),"
        " list(warnings.filters), sys.getrecursionlimit())\n"
        "import meteora_edge, meteora_edge.cli.main\n"
        "after = (dict(os.environ), list(logging.root.handlers), logging.root.level, np.geterr(),"
        " list(warnings.filters), sys.getrecursionlimit())\n"
        "assert before == after, [b for b, a in zip(before, after) if b != a]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
