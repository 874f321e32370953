"""Evidence-quality evaluation: selection among each question's candidates, or over a corpus index.

Per question the candidates are its context sentences (each prefixed by its paragraph
title) or its paragraphs; gold are the supporting sentences or the paragraphs that hold
them. Each method selects candidate positions; metrics are macro-averaged over questions.

Method specs: the baselines ``topk-cosine:K``, ``bm25:K`` and ``topk-hybrid:K`` (the fused
query score); ``ecse`` (METEORA: the query as the rationale, cosine, window 0) with ECSE
settings, e.g. ``ecse:scoring=hybrid,rationales=auto``; ``ecse-window:W``; ``meve`` (MeVe's
phases, ECSE off) and ``pipeline`` (all phases with their defaults) take pipeline settings,
e.g. ``pipeline:scoring=dense,n_min=3``.

Every method that uses the GGUF model has ``llm`` in its name and takes pipeline settings:
``ecse-llm`` (ECSE on the model's rationales; METEORA's dense scoring unless set, e.g.
``ecse-llm:scoring=hybrid,rationales=llm+auto``), ``ecse-llm-verify`` (plus the model as
verifier: one chunk per prompt, or batched with ``verification_batch=N``), and
``pipeline-llm`` (the pipeline's defaults plus the LLM rerank of ECSE's best candidates;
``rationales=llm+auto`` adds the model's rationales, ``verification=llm`` its verdicts).

The package's modules: ``datasets`` (the HotpotQA layout and per-query JSONL), ``beir``
(corpus-level data: corpus, queries, qrels), ``metrics`` (P/R/F1, recall@k, nDCG@k),
``methods`` (method specs), ``report`` (running, averaging, tables), ``corpus`` (the
corpus-level run over an index). A stage of its own, after ``pipeline`` (it runs the
pipeline's phases and METEORA's parts) and before ``training`` (which labels with its loader
and metric).
"""

from .beir import BeirData, CorpusQuery, load_beir
from .corpus import CorpusRun, build_corpus_method, corpus_index, corpus_method_config, evaluate_corpus, retrieval_table, temporary_index
from .datasets import EvalQuestion, data_layout, load_hotpot, load_jsonl, load_questions
from .methods import LLM_METHODS, CachedEncoder, Method, SharedLLMRoles, build_method
from .metrics import SelectionMetrics, ndcg_at_k, precision_recall_f1, recall_at_k
from .report import (
    BREAKDOWNS,
    MethodReport,
    breakdown,
    breakdown_table,
    evaluate,
    group_key,
    plot_report,
    report_table,
    require_matplotlib,
)

__all__ = [
    "BeirData", "CorpusQuery", "load_beir",
    "CorpusRun", "build_corpus_method", "corpus_index", "corpus_method_config", "evaluate_corpus", "retrieval_table", "temporary_index",
    "EvalQuestion", "data_layout", "load_hotpot", "load_jsonl", "load_questions",
    "LLM_METHODS", "CachedEncoder", "Method", "SharedLLMRoles", "build_method",
    "SelectionMetrics", "ndcg_at_k", "precision_recall_f1", "recall_at_k",
    "BREAKDOWNS", "MethodReport", "breakdown", "breakdown_table", "evaluate", "group_key", "plot_report",
    "report_table", "require_matplotlib",
]
