"""``meteora-edge eval``: evidence quality of every method on HotpotQA-format data."""

from __future__ import annotations

import json
import platform
import sys
import time

import click

from meteora_edge import __version__
from meteora_edge.pipeline.budget import load_token_counter
from meteora_edge.evaluation import (
    BREAKDOWNS,
    LLM_METHODS,
    CachedEncoder,
    SharedLLMRoles,
    breakdown,
    breakdown_table,
    build_method,
    evaluate,
    load_hotpot,
    plot_report,
    report_table,
    require_matplotlib,
)
from meteora_edge.fileio import write_text_atomic
from meteora_edge.models.cpu_features import cpu_info
from meteora_edge.selection.llm_roles import RATIONALE_PROMPTS, all_llm_roles, check_llm_bundle

from .encoder_option import bundle_option, cache_option, encoder_from_options, precision_option, threads_option
from .output import check_output_path

DEFAULT_METHODS = ("topk-cosine:2", "topk-cosine:3", "topk-cosine:5", "bm25:3", "ecse", "ecse-window:1", "meve", "pipeline")


@click.command("eval")
@click.option("--data", "data_file", required=True, help="HotpotQA-format JSON (Hugging Face datasets layout).")
@click.option("--level", type=click.Choice(["sentence", "paragraph"]), default="sentence", show_default=True)
@click.option("--method", "methods", multiple=True, help=f"Method spec; repeatable [{', '.join(DEFAULT_METHODS)}].")
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
def eval_command(data_file: str, level: str, methods: tuple[str, ...], limit: int | None, tokenizer: str | None,
                 bundle: str | None, threads: int, precision: str, llm_threads: int, num_rationales: int, rationale_prompt: str, output: str | None,
                 plot_file: str | None, by: tuple[str, ...], per_question: bool) -> None:
    """Measure how much gold evidence each method keeps and how many tokens it spends."""
    if output:
        check_output_path(output)
    if plot_file:
        check_output_path(plot_file, option="--plot")
        require_matplotlib()
    questions = load_hotpot(data_file, level=level, limit=limit)
    specs = methods or DEFAULT_METHODS
    needs_llm = any(s.partition(":")[0] in LLM_METHODS for s in specs)
    check_llm_bundle(bundle, generate=needs_llm, verify=needs_llm)
    base_encoder = encoder_from_options(bundle, threads, precision)
    encoder = CachedEncoder(base_encoder)
    counter = load_token_counter(tokenizer)
    needs_llm = any(s.partition(":")[0] in LLM_METHODS for s in specs)
    roles = None
    if needs_llm:
        loaded = all_llm_roles(bundle, threads=llm_threads, num_rationales=num_rationales, prompt=rationale_prompt)
        roles = SharedLLMRoles(**loaded.__dict__)
    built = {s: build_method(s, encoder, token_counter=counter, **({} if roles is None else roles.as_kwargs())) for s in specs}
    with click.progressbar(length=len(questions) * len(built), label="evaluating", file=sys.stderr) as bar:
        shown = 0

        def progress(done: int, total: int) -> None:
            nonlocal shown
            bar.update(done - shown)
            shown = done

        t0 = time.perf_counter()
        for q in questions:
            encoder.warm(q)
        embed_ms = (time.perf_counter() - t0) * 1000 / len(questions)
        reports = evaluate(questions, built, token_counter=counter, progress=progress)
    yes_no = sum(q.answer.strip().lower() in ("yes", "no") for q in questions)
    click.echo(report_table(reports, skipped_yes_no=yes_no))
    tables = [breakdown(questions, reports, b) for b in by]
    for table in tables:
        click.echo("")
        click.echo(breakdown_table(table))
    click.echo(f"(latencies exclude embedding the question and its candidates: {embed_ms:.1f} ms per question, "
               f"done once for all methods with {encoder.identity})")
    cpu = cpu_info()
    click.echo(f"(CPU: {cpu.model}, {cpu.machine}; int8 dot-product: {cpu.int8_dot or 'none'} — int8 figures move "
               "slightly between CPUs)")
    if needs_llm:
        click.echo("(the GGUF model's rationales and relevance scores are computed once per question and shared: "
                   "the first method that asks for them carries their time)")
    meta = {
        "data": data_file, "level": level, "questions": len(questions), "yes_no_skipped": yes_no,
        "encoder": encoder.identity, "embedding_ms_per_question": round(embed_ms, 2), "tokenizer": counter.identity, "meteora_edge": __version__,
        "python": platform.python_version(), "machine": platform.machine(), "cpu": cpu.model,
        "cpu_int8_dot": cpu.int8_dot,
    }
    if output:
        report = {"meta": meta, "methods": [r.to_dict(with_questions=per_question) for r in reports]}
        if tables:
            report["breakdowns"] = tables
        write_text_atomic(output, json.dumps(report, indent=2) + "\n")
        click.echo(f"wrote {output}", err=True)
    if plot_file:
        plot_report(reports, plot_file, title=f"{len(questions)} questions, {level} level, {encoder.identity}")
        click.echo(f"wrote {plot_file}", err=True)
