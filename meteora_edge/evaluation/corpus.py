"""Corpus-level evaluation: each query runs through the pipeline over one index of the whole corpus.

The index holds the corpus documents (chunked as ``index build`` chunks them); a chunk
counts as its document, so selection is scored at document level against the qrels:
P/R/F1 of the documents of the selected chunks, all-gold, items (chunks) and tokens.
Retrieval is scored on the candidate stage, so a miss can be told apart as retrieval's or
selection's: ``R@10`` and ``nDCG@10`` of the candidate ranking (kNN ∪ BM25, ``k_init`` of
each, best first), ``R@pool`` of the whole ranking, ``R@cand`` of every candidate the
method saw (the ranking plus what the rationales and the fallback fetched) — selection's
recall can never exceed it.

Methods (see :func:`build_corpus_method`): the baselines ``topk-cosine:K``, ``bm25:K`` and
``topk-hybrid:K`` take the first K of the candidate stage ranked by cosine, BM25 or the
fused score; ``meve[:settings]`` and ``pipeline[:settings]`` run every phase.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..index.local_index import LocalIndex
from ..index.generations import target_state
from ..models.encoders import EncoderLike
from ..pipeline.budget import TokenCounter, WhitespaceCounter
from ..pipeline.config import PipelineConfig
from ..pipeline.request import SelectRequest
from ..pipeline.runtime import SelectRuntime
from .beir import BeirData, CorpusQuery
from .methods import TOPK_SCORING, pipeline_method_config, topk_k
from .metrics import ndcg_at_k, precision_recall_f1, recall_at_k
from .report import MethodReport

__all__ = ["CorpusRun", "CorpusMethod", "build_corpus_method", "corpus_method_config", "corpus_index", "evaluate_corpus",
           "retrieval_table", "temporary_index", "CORPUS_METHODS"]

CORPUS_METHODS = ("topk-cosine:K", "topk-hybrid:K", "bm25:K", "meve[:settings]", "pipeline[:settings]")
_NDCG_AT = 10


@dataclass(frozen=True)
class CorpusRun:
    """One query's run: the chunk ids selected, the candidate stage's ranking and every candidate, with their texts."""

    selected: list[int]
    texts: list[str]
    ranking: list[int]
    candidates: list[int]


CorpusMethod = Callable[[str], CorpusRun]


def corpus_method_config(spec: str) -> tuple[PipelineConfig, int | None]:
    """The pipeline settings a corpus-level method runs with, and how many of its chunks it keeps (None: all).

    The baselines run the pipeline's own candidate stage (``k_init`` of the default
    configuration, or K when larger) with their scoring and keep its first K.

    Raises:
        ConfigError: a method that does not run over an index, or a bad K or setting.
    """
    name = spec.partition(":")[0]
    if name in TOPK_SCORING:
        k, (scoring, lexical_scorer) = topk_k(spec), TOPK_SCORING[name]
        return PipelineConfig(k_init=max(k, PipelineConfig().k_init), scoring=scoring, lexical_scorer=lexical_scorer,
                              rationales="query",
                              use_ecse=False, verification="none", n_min=None, theta_redundancy=None, t_max=None), k
    if name in ("meve", "pipeline"):
        return pipeline_method_config(spec), None
    raise ConfigError(f"method {spec!r} does not run over an index; at corpus level use {', '.join(CORPUS_METHODS)}")


def build_corpus_method(spec: str, index: Any, encoder: EncoderLike, *,
                        token_counter: TokenCounter | None = None) -> CorpusMethod:
    """Turn a method spec into a function ``query -> CorpusRun`` over ``index`` (see :func:`corpus_method_config`).

    Raises:
        ConfigError: a method that does not run over an index, or a bad K or setting.
    """
    config, keep = corpus_method_config(spec)
    runtime, settings = SelectRuntime(encoder=encoder, token_counter=token_counter), config.to_dict()

    def run(query: str) -> CorpusRun:
        result = runtime.result(SelectRequest(query=query, index=index, settings=settings))
        records = result.trace.candidates
        ranking = [int(r.chunk_id) for r in records if r.retrieval_score is not None]
        ids, texts = [int(i) for i in result.ids], list(result.passages)
        if keep is not None:
            ids, texts = ids[:keep], texts[:keep]
        return CorpusRun(ids, texts, ranking, [int(r.chunk_id) for r in records])

    return run


def corpus_index(data: BeirData, encoder: EncoderLike, path: str, *, chunk_size: int = 256,
                 progress: Callable[[int, int], None] | None = None) -> tuple[LocalIndex, bool]:
    """The index of ``data``'s corpus at ``path``: reused when one is there, else built.

    Returns:
        ``(index, built)``.

    Raises:
        InputError: ``path`` holds an index of other documents, or something else than an index.
        LocalIndexError: the index there was built with another encoder, or is damaged.
    """
    from pathlib import Path

    try:
        state = target_state(Path(path))
    except InputError:
        raise InputError(f"{path} is neither an index nor a missing or empty folder; refusing to touch it, "
                         "give another index folder") from None
    if state == "index":
        index = LocalIndex.load(path, encoder=encoder)
        sources = {r["source"] for r in index.records(range(len(index)))}
        corpus = {d.source_id for d in data.documents}
        if sources != corpus:
            extra, missing = len(sources - corpus), len(corpus - sources)
            raise InputError(f"the index {path} does not hold the corpus of {data.folder} ({extra} of its documents "
                             f"are not in corpus.jsonl, {missing} corpus documents are not in it); give another "
                             "index folder or remove this one")
        return index, False
    return LocalIndex.build(path, data.documents, encoder, chunk_size=chunk_size, progress=progress), True


@contextlib.contextmanager
def temporary_index(data: BeirData, encoder: EncoderLike, *, chunk_size: int = 256,
                    progress: Callable[[int, int], None] | None = None) -> Iterator[LocalIndex]:
    """An index of ``data``'s corpus in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="meteora-eval-") as folder:
        yield corpus_index(data, encoder, f"{folder}/index", chunk_size=chunk_size, progress=progress)[0]


class _Sources:
    """The document (corpus id) of each chunk id, read from the index once per chunk."""

    def __init__(self, index: Any) -> None:
        self.index, self._of = index, {}  # type: Any, dict[int, str]

    def __call__(self, ids: Sequence[int]) -> list[str]:
        missing = [i for i in dict.fromkeys(ids) if i not in self._of]
        if missing:
            for i, record in zip(missing, self.index.records(missing)):
                self._of[i] = str(record["source"])
        return [self._of[i] for i in ids]


def evaluate_corpus(
    queries: Sequence[CorpusQuery],
    methods: dict[str, CorpusMethod],
    index: Any,
    *,
    token_counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[MethodReport]:
    """Run every method on every query and macro-average selection and retrieval metrics.

    Returns:
        One :class:`MethodReport` per method; its ``retrieval`` holds ``recall@10``,
        ``recall@pool``, ``recall@candidates`` and ``ndcg@10``.
    """
    counter = token_counter or WhitespaceCounter()
    sources = _Sources(index)
    reports, done, total = [], 0, len(queries) * len(methods)
    for spec, method in methods.items():
        rows = []
        for q in queries:
            t0 = time.perf_counter()
            run = method(q.text)
            ms = (time.perf_counter() - t0) * 1000
            chosen = sorted(set(sources(run.selected)))
            ranked = list(dict.fromkeys(sources(run.ranking)))
            metrics = precision_recall_f1(chosen, q.gold)
            rows.append({
                "id": q.qid, "selected": chosen, "gold": sorted(q.gold), "precision": metrics.precision,
                "recall": metrics.recall, "f1": metrics.f1, "all_gold": q.gold <= set(chosen),
                "items": len(run.selected), "tokens": sum(counter.count(run.texts)) if run.texts else 0, "ms": ms,
                "recall@10": recall_at_k(ranked, q.gold, _NDCG_AT), "recall@pool": recall_at_k(ranked, q.gold, max(len(ranked), 1)),
                "recall@candidates": recall_at_k(sorted(set(sources(run.candidates))), q.gold, max(len(run.candidates), 1)),
                "ndcg@10": ndcg_at_k(ranked, q.relevance, _NDCG_AT), "ranked": ranked[:_NDCG_AT],
            })
            done += 1
            if progress:
                progress(done, total)
        mean = {name: float(np.mean([r[name] for r in rows]))
                for name in ("precision", "recall", "f1", "all_gold", "items", "tokens")}
        reports.append(MethodReport(
            method=spec, **mean,
            latency_ms_p50=float(np.median([r["ms"] for r in rows])), latency_ms_mean=float(np.mean([r["ms"] for r in rows])),
            per_question=rows,
            retrieval={name: float(np.mean([r[name] for r in rows]))
                       for name in ("recall@10", "recall@pool", "recall@candidates", "ndcg@10")},
        ))
    return reports


def retrieval_table(reports: Sequence[MethodReport]) -> str:
    """The candidate stage's table: recall@10, recall of the pool, of every candidate, and nDCG@10."""
    head = f"{'method':<28} {'R@10':>6} {'R@pool':>7} {'R@cand':>7} {'nDCG@10':>8}"
    lines = [head, "-" * len(head)]
    for r in reports:
        s = r.retrieval or {}
        lines.append(f"{r.method:<28} {s['recall@10']:6.3f} {s['recall@pool']:7.3f} {s['recall@candidates']:7.3f} "
                     f"{s['ndcg@10']:8.3f}")
    lines.append("(the pool: the query's kNN and BM25 hits, k_init of each (50 unless set), ranked by the method's "
                 "scoring; R@cand adds what the rationales and the fallback fetched)")
    return "\n".join(lines)
