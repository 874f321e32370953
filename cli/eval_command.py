"""``meteora-edge eval``: evidence quality of every method, on per-question candidates or over a corpus index."""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from meteora_edge import __version__
from meteora_edge.errors import InputError, MeteoraError
from meteora_edge.evaluation import (
    BREAKDOWNS,
    LLM_METHODS,
    CachedEncoder,
    SharedLLMRoles,
    breakdown,
    breakdown_table,
    build_corpus_method,
    build_method,
    corpus_index,
    corpus_method_config,
    data_layout,
    evaluate,
    evaluate_corpus,
    load_beir,
    load_questions,
    plot_report,
    report_table,
    require_matplotlib,
    retrieval_table,
    temporary_index,
)
from meteora_edge.fileio import write_text_atomic
from meteora_edge.models.cpu_features import cpu_info
from meteora_edge.pipeline.budget import load_token_counter
from meteora_edge.pipeline.request import RATIONALE_PROMPTS, reword
from meteora_edge.pipeline.runtime import SelectRuntime, check_llm_bundle, load_bundle

from .encoder_option import (
    bundle_option,
    cache_disabled,
    cache_option,
    precision_option,
    threads_option,
)
from .output import check_output_path, same_file
from .select_inputs import CLI_NAMES

DEFAULT_METHODS = ("topk-cosine:2", "topk-cosine:3", "topk-cosine:5", "bm25:3", "ecse", "ecse-window:1", "meve", "pipeline")
DEFAULT_CORPUS_METHODS = ("topk-cosine:3", "bm25:3", "topk-hybrid:3", "pipeline")


@click.command("eval")
@click.option("--data", "data_path", required=True,
              help="HotpotQA-layout JSON, per-query JSONL (told apart by content) or a BEIR folder (corpus level).")
@click.option("--level", type=click.Choice(["sentence", "paragraph"]), default=None,
              help="HotpotQA layout: candidates are sentences or paragraphs [sentence].")
@click.option("--split", default=None, help="BEIR folder: the qrels split to evaluate [test].")
@click.option("--index", "index_path", type=click.Path(file_okay=False), default=None,
              help="BEIR folder: reuse the index of the corpus here, or build it here (default: a temporary index).")
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True,
              help="BEIR folder: words per chunk when the index is built.")
@click.option("--method", "methods", multiple=True,
              help=f"Method spec; repeatable [{', '.join(DEFAULT_METHODS)}; over a BEIR folder {', '.join(DEFAULT_CORPUS_METHODS)}].")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N questions.")
@click.option("--tokenizer", default=None, help="Tokenizer for token counts (tokenizer.json, .gguf, bundle, whitespace).")
@bundle_option
@threads_option
@precision_option
@cache_option
@click.option("--llm-threads", type=click.IntRange(min=1), default=1, show_default=True, help="Threads of the GGUF model.")
@click.option("--num-rationales", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Rationales the GGUF model writes per question (llm methods).")
@click.option("--rationale-prompt", type=click.Choice(RATIONALE_PROMPTS), default="hops", show_default=True,
              help="The GGUF model's rationale prompt: one rationale per hop, or METEORA's general few-shot prompt.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write the JSON report here.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), default=None, help="Write an F1-vs-tokens PNG here.")
@click.option("--by", "by", type=click.Choice(BREAKDOWNS), multiple=True,
              help="Also print F1 per group (the item's group, or HotpotQA's type) or per number of gold items; repeatable.")
@click.option("--per-question", is_flag=True, help="Include every question's selection in the JSON report.")
def eval_command(data_path: str, level: str | None, split: str | None, index_path: str | None, chunk_size: int,
                 methods: tuple[str, ...], limit: int | None, tokenizer: str | None, bundle: str | None, threads: int,
                 precision: str, llm_threads: int, num_rationales: int, rationale_prompt: str, output: str | None,
                 plot_file: str | None, by: tuple[str, ...], per_question: bool) -> None:
    """Measure how much gold evidence each method keeps and how many tokens it spends.

    \b
    --data FILE.json    HotpotQA layout: each question's context sentences (or paragraphs) are its candidates
    --data FILE.jsonl   per-query JSONL: {"query": ..., "candidates": [...], "gold": [...]} a line
    --data DIR          BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): every query runs over
                        one index of the corpus; selection is scored against the qrels, retrieval too
    """
    if output:
        check_output_path(output, inputs=[("--data", data_path), ("--tokenizer", tokenizer)])
    if plot_file:
        check_output_path(plot_file, option="--plot", inputs=[("--data", data_path), ("--tokenizer", tokenizer)])
        if output and same_file(output, plot_file):
            raise InputError(f"--plot {plot_file} is also --output; give them two files")
        require_matplotlib()
    layout = data_layout(data_path)
    if layout == "beir":
        if level is not None:
            raise InputError("--level applies to the HotpotQA layout only; a BEIR folder's documents are its candidates")
        _eval_corpus(data_path, split=split or "test", index_path=index_path, chunk_size=chunk_size, methods=methods,
                     limit=limit, tokenizer=tokenizer, bundle=bundle, threads=threads, precision=precision,
                     output=output, plot_file=plot_file, by=by, per_question=per_question)
        return
    for flag, value in (("--split", split), ("--index", index_path)):
        if value is not None:
            raise InputError(f"{flag} applies to a BEIR folder only; {data_path} is a file ({layout})")
    if layout != "hotpotqa" and level is not None:
        raise InputError(f"--level applies to the HotpotQA layout only; {data_path} is per-query JSONL, whose candidates are given")
    questions = load_questions(data_path, level=level, limit=limit)
    empty = _warn_empty_candidates(questions)
    specs = methods or DEFAULT_METHODS
    needs_llm = any(s.partition(":")[0] in LLM_METHODS for s in specs)
    try:
        loaded = load_bundle(bundle)
        check_llm_bundle(loaded, ("llm",) if needs_llm else (), need="methods with 'llm' in their name need a GGUF model")
        counter = load_token_counter(tokenizer)
        runtime = SelectRuntime.load(loaded, tokenizer=counter, threads=threads, precision=precision,
                                     cache=not cache_disabled(), cross_encoder=False, llm=needs_llm,
                                     llm_threads=llm_threads, num_rationales=num_rationales,
                                     rationale_prompt=rationale_prompt)
    except MeteoraError as exc:
        raise reword(exc, CLI_NAMES) from None
    encoder = CachedEncoder(runtime.encoder)
    roles = SharedLLMRoles(**runtime.llm_roles()) if needs_llm else None
    built = {s: build_method(s, encoder, token_counter=counter, **({} if roles is None else roles.as_kwargs())) for s in specs}
    with _progress(len(questions) * len(built)) as progress:
        t0 = time.perf_counter()
        for q in questions:
            encoder.warm(q)
        embed_ms = (time.perf_counter() - t0) * 1000 / len(questions)
        reports = evaluate(questions, built, token_counter=counter, progress=progress)
    yes_no = sum(q.answer.strip().lower() in ("yes", "no") for q in questions)
    click.echo(report_table(reports, skipped_yes_no=yes_no))
    tables = _breakdowns(questions, reports, by)
    click.echo(f"(latencies exclude embedding the question and its candidates: {embed_ms:.1f} ms per question, "
               f"done once for all methods with {encoder.identity})")
    _cpu_note()
    if needs_llm:
        click.echo("(the GGUF model's rationales and relevance scores are computed once per question and shared: "
                   "the first method that asks for them carries their time)")
    meta = {
        "data": data_path, "layout": layout, "level": level or ("sentence" if layout == "hotpotqa" else None),
        "questions": len(questions), "yes_no_skipped": yes_no, "empty_candidates_skipped": empty,
        "encoder": encoder.identity,
        "embedding_ms_per_question": round(embed_ms, 2), "tokenizer": counter.identity, **_machine(),
    }
    _write(output, plot_file, meta, reports, tables, per_question,
           title=f"{len(questions)} questions, {meta['level'] or layout}, {encoder.identity}")


def _warn_empty_candidates(questions: Any) -> int:
    """One warning line when candidates were left out for being empty; their number."""
    hit = [q for q in questions if q.empty_skipped]
    count = sum(len(q.empty_skipped) for q in hit)
    if count:
        first = hit[0]
        click.echo(f"warning: skipped {count} empty candidate(s) in {len(hit)} question(s) (first: {first.where}: "
                   f"candidate {first.empty_skipped[0]}); each question runs with the rest", err=True)
    return count


def _eval_corpus(folder: str, *, split: str, index_path: str | None, chunk_size: int, methods: tuple[str, ...],
                 limit: int | None, tokenizer: str | None, bundle: str | None, threads: int, precision: str,
                 output: str | None, plot_file: str | None, by: tuple[str, ...], per_question: bool) -> None:
    """``eval --data DIR``: every query through the pipeline over one index of the corpus."""
    specs = methods or DEFAULT_CORPUS_METHODS
    llm = [s for s in specs if s.partition(":")[0] in LLM_METHODS]
    if llm:
        raise InputError(f"--method {llm[0]}: the GGUF model's methods do not run at corpus level yet; "
                         "use topk-cosine:K, topk-hybrid:K, bm25:K, meve or pipeline")
    for spec in specs:  # every spec is checked before the corpus is read and indexed
        corpus_method_config(spec)
    started = time.perf_counter()
    data = load_beir(folder, split=split, limit=limit)
    runtime = SelectRuntime.load(bundle, tokenizer=tokenizer, threads=threads, precision=precision,
                                 cache=not cache_disabled(), cross_encoder=False)
    encoder, counter = runtime.encoder, runtime.token_counter
    t0 = time.perf_counter()
    with _opened_index(data, encoder, index_path, chunk_size) as (index, built):
        index_s = time.perf_counter() - t0
        runs = {s: build_corpus_method(s, index, encoder, token_counter=counter) for s in specs}
        t1 = time.perf_counter()
        with _progress(len(data.queries) * len(runs)) as progress:
            reports = evaluate_corpus(data.queries, runs, index, token_counter=counter, progress=progress)
        eval_s = time.perf_counter() - t1
        chunks = len(index)
    wall_s = time.perf_counter() - started
    click.echo(f"{len(data.queries)} queries of split {split!r} over {len(data.documents)} documents "
               f"({chunks} chunks, index {'built' if built else 'reused'} in {index_s:.1f} s)"
               + (f"; {data.skipped_queries} queries without a document scored above 0 skipped" if data.skipped_queries else ""))
    click.echo("")
    click.echo("selection (documents of the selected chunks against the qrels):")
    click.echo(report_table(reports, skipped_yes_no=None))
    click.echo("")
    click.echo("retrieval (the candidate stage):")
    click.echo(retrieval_table(reports))
    tables = _breakdowns(data.queries, reports, by)
    click.echo(f"(wall time {wall_s:.1f} s: index {index_s:.1f} s, {eval_s:.1f} s for {len(runs)} methods; "
               f"encoder {getattr(encoder, 'identity', None) or type(encoder).__name__})")
    _cpu_note()
    from meteora_edge.models.encoders import encoder_id

    meta = {
        "data": folder, "layout": "beir", "split": split, "queries": len(data.queries), "documents": len(data.documents),
        "chunks": chunks, "skipped_queries": data.skipped_queries, "index": index_path, "index_built": built,
        "chunk_size": chunk_size, "index_seconds": round(index_s, 2), "eval_seconds": round(eval_s, 2),
        "wall_seconds": round(wall_s, 2), "encoder": encoder_id(encoder), "tokenizer": counter.identity, **_machine(),
    }
    _write(output, plot_file, meta, reports, tables, per_question,
           title=f"{len(data.queries)} queries over {len(data.documents)} documents, {encoder_id(encoder)}")


@contextmanager
def _opened_index(data: Any, encoder: Any, index_path: str | None, chunk_size: int) -> Iterator[tuple[Any, bool]]:
    with _progress(len(data.documents), label="indexing") as progress:
        if index_path is None:
            with temporary_index(data, encoder, chunk_size=chunk_size, progress=progress) as index:
                yield index, True
            return
        index, built = corpus_index(data, encoder, index_path, chunk_size=chunk_size, progress=progress)
    yield index, built


@contextmanager
def _progress(length: int, *, label: str = "evaluating") -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr driven by ``(done, total)`` callbacks."""
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        shown = 0

        def progress(done: int, total: int) -> None:
            nonlocal shown
            bar.length = total
            bar.update(done - shown)
            shown = done

        yield progress


def _breakdowns(questions: Any, reports: Any, by: tuple[str, ...]) -> list[dict[str, Any]]:
    tables = [breakdown(questions, reports, b) for b in by]
    for table in tables:
        click.echo("")
        click.echo(breakdown_table(table))
    return tables


def _cpu_note() -> None:
    cpu = cpu_info()
    click.echo(f"(CPU: {cpu.model}, {cpu.machine}; int8 dot-product: {cpu.int8_dot or 'none'} — int8 figures move "
               "slightly between CPUs)")


def _machine() -> dict[str, Any]:
    cpu = cpu_info()
    return {"meteora_edge": __version__, "python": platform.python_version(), "machine": platform.machine(),
            "cpu": cpu.model, "cpu_int8_dot": cpu.int8_dot}


def _write(output: str | None, plot_file: str | None, meta: dict[str, Any], reports: Any, tables: list[dict[str, Any]],
           per_question: bool, *, title: str) -> None:
    if output:
        report: dict[str, Any] = {"meta": meta, "methods": [r.to_dict(with_questions=per_question) for r in reports]}
        if tables:
            report["breakdowns"] = tables
        write_text_atomic(output, json.dumps(report, indent=2) + "\n")
        click.echo(f"wrote {output}", err=True)
    if plot_file:
        plot_report(reports, plot_file, title=title)
        click.echo(f"wrote {plot_file}", err=True)
