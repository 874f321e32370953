"""``select``: evidence selection over given chunks or a local index.

The options become one :class:`~meteora_edge.pipeline.request.SelectRequest` (checked before
any model loads, as are the files, output path, index, tokenizer and bundle), a
:class:`~meteora_edge.pipeline.runtime.SelectRuntime` loads the bundle's models in order of cost
(encoder, cross-encoder, then the GGUF model) and runs it, and the result is printed by
:mod:`meteora_edge.cli.select_output`. The library's messages name the request's keys; the CLI
puts its flags in their place (:data:`~meteora_edge.cli.select_inputs.CLI_NAMES`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import click

from meteora_edge.errors import InputError, MeteoraError
from meteora_edge.fileio import read_chunks_file, source_name, write_text_atomic
from meteora_edge.pipeline.budget import load_token_counter
from meteora_edge.pipeline.request import RATIONALE_PROMPTS, SelectRequest, reword
from meteora_edge.pipeline.runtime import SelectRuntime, check_llm_bundle, load_bundle

from .encoder_option import bundle_option, cache_disabled, cache_option, context_size_option, llm_threads_option
from .encoder_option import precision_option, threads_option, tokenizer_option
from .index_location import INDEX_HELP, check_encoder, index_bundle, open_index
from .output import check_output_path, stdout_is_unicode
from .select_inputs import CLI_NAMES, WINDOW_HELP, gather_rationales, split_strategy
from .select_output import DETAILS, FORMATS, render

HASHING_NOTE = ("note: no --bundle (or METEORA_EDGE_BUNDLE) given, so the hashing encoder is used: it matches words, "
                "not meaning; 'meteora-edge models install minilm-l6-v2 --bundle models/bundles/minilm' gets a semantic "
                "encoder in under a minute, without torch (then give --bundle models/bundles/minilm)")


def _output_choice(fmt: str | None, legacy: str | None, detail: str | None, trace: bool) -> tuple[str, str]:
    if fmt and legacy and fmt != legacy:
        raise InputError(f"--{legacy} conflicts with --format {fmt}; give one")
    if trace and detail == "summary":
        raise InputError("--trace asks for the full record; it conflicts with --detail summary")
    return fmt or legacy or "json", "full" if trace else detail or "summary"


def _check_tau(value: float | None) -> float | None:
    """--tau is a cosine or a probability: outside [-1, 1] it is refused with one line."""
    if value is not None and not -1.0 <= value <= 1.0:
        raise click.ClickException(f"--tau {value} is outside the relevance score's range [-1, 1] "
                                   "(a cosine; the cross-encoder's probability needs [0, 1])")
    return value


def _number_or_off(ctx: click.Context, param: click.Parameter, value: str | None) -> float | str | None:
    """--cover-z and --token-cover are a number or ``off``."""
    if value is None or value.strip().lower() == "off":
        return None if value is None else "off"
    try:
        number = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a number nor 'off'") from None
    if not math.isfinite(number):
        raise click.BadParameter(f"{value!r} is not a finite number")
    return number


@click.command()
@click.option("--chunks", "chunks_file", default=None,
              help="JSON list, {\"chunks\": [...]} or JSONL of candidate chunks (- reads standard input).")
@click.option("--index", "index_dir", default=None, help=INDEX_HELP)
@click.option("--query", "-q", default=None, help="The question (used as a rationale when none is given).")
@click.option("--rationale", "rationale_texts", multiple=True, help="A rationale text; repeatable.")
@click.option("--rationales", "rationale_files", multiple=True,
              help="File of rationales (tagged text, a JSON list, or {\"rationales\"|\"response\": …}); or 'auto' (the "
                   "default without rationales and LLM: the question's parts and a second hop, written by rule), "
                   "'query' (the question alone) or 'llm+auto' (with --generate-rationales: the model's rationales "
                   "join the rule-written ones).")
@click.option("--use-query-as-rationale", is_flag=True, help="Add the query to the given rationales.")
@click.option("--expansion-window", type=click.IntRange(min=0), default=None, help=WINDOW_HELP)
@click.option("--elbow-z", type=float, default=1.0, show_default=True, help="z-score threshold of the pooled elbow.")
@click.option("--no-ecse", is_flag=True, help="Skip ECSE selection (pure MeVe: verify every candidate).")
@click.option("--k-init", type=click.IntRange(min=1), default=None, help="Candidates fetched from the index by kNN (and BM25) [50].")
@click.option("--scoring", type=click.Choice(["hybrid", "dense", "lexical"]), default=None,
              help="How chunks are scored: cosine + BM25 standardised and added (hybrid, the default), cosine "
                   "alone (dense: ECSE exactly as METEORA) or BM25 alone (lexical).")
@click.option("--lexical-scorer", type=click.Choice(["auto", "bm25", "sparse"]), default=None,
              help="The lexical half of the score: BM25, or the learned sparse model of a bundle that holds one "
                   "(sparse); auto follows the index, and for given chunks stays with BM25 [auto].")
@click.option("--pooled-z", type=float, default=None,
              help="Hybrid/lexical ECSE keeps chunks whose pooled score is this many standard deviations above the mean [2.0].")
@click.option("--cover-z", default=None, metavar="FLOAT|off", callback=_number_or_off,
              help="ECSE's term cover also keeps each candidate this many standard deviations above the mean that "
                   "holds a rationale term no kept chunk holds, unless the best leads the runner-up by 0.5; "
                   "it runs only where the token cover cannot (no rung, an LLM rerank, --token-cover off, the "
                   "hashing encoder); off turns it off [0.5].")
@click.option("--token-cover", default=None, metavar="GAIN|off", callback=_number_or_off,
              help="After the verification rung, the token cover also accepts each candidate at least half a standard "
                   "deviation above the mean that raises by GAIN (0-1) the share of the question's words an accepted "
                   "chunk matches by the encoder's word-piece vectors (paraphrases count); runs only with a rung "
                   "(--index, or --tau/--verification); off turns it off [0.05; the hashing encoder has none].")
@click.option("--verification", type=click.Choice(["auto", "llm", "cross-encoder", "cosine", "none"]), default=None,
              help="Verification rung [auto with --index, or with --chunks and --tau; else none].")
@click.option("--tau", type=float, default=None, callback=lambda ctx, param, value: _check_tau(value),
              help="Relevance threshold of the cross-encoder/cosine rung, in [-1, 1] [the encoder's own: "
                   "0.35 for a bundle that records none, 0.1 for the hashing encoder; 0.4 for the cross-encoder].")
@click.option("--n-min", type=click.IntRange(min=0), default=None, help="BM25 fallback below this many chunks [3 with --index].")
@click.option("--theta", type=click.FloatRange(-1.0, 1.0), default=None, help="Near-duplicate cosine [0.85 with --index].")
@click.option("--t-max", type=click.IntRange(min=1), default=None, help="Token budget [512 with --index].")
@click.option("--oversize", type=click.Choice(["drop", "truncate"]), default="drop", show_default=True,
              help="A chunk larger than the whole budget is dropped or cut to fit (when no chunk fits, the best is cut anyway).")
@tokenizer_option
@bundle_option
@threads_option
@precision_option
@cache_option
@click.option("--generate-rationales", is_flag=True, help="Write the rationales with the bundle's GGUF model (needs --query).")
@click.option("--num-rationales", type=click.IntRange(1, 20), default=3, show_default=True, help="Rationales to generate.")
@click.option("--rationale-prompt", type=click.Choice(RATIONALE_PROMPTS), default="hops", show_default=True,
              help="Generated rationales: one per hop of the question, or METEORA's general few-shot prompt.")
@click.option("--sample-shots", default=None,
              help="Few-shot examples for --generate-rationales (JSON, JSONL or text; METEORA's forms; they use "
                   "METEORA's prompt) [the shipped ones].")
@click.option("--domain", default=None, help="Subject named in the GGUF prompts, e.g. 'online store policies'.")
@click.option("--verify", "llm_verify", is_flag=True, help="Judge each selected chunk with the bundle's GGUF model.")
@click.option("--verify-batch", type=click.IntRange(1, 64), default=None,
              help="Chunks the GGUF verifier judges per prompt [1: one at a time, as METEORA].")
@click.option("--llm-rerank", is_flag=True,
              help="Let the bundle's GGUF model score ECSE's best candidates and re-cut them with ECSE's scores.")
@click.option("--reject", "reject_rules", multiple=True, metavar="RULE",
              help="A rejection rule in plain words (repeatable), e.g. 'draft notes that are not part of the signed "
                   "agreement': --verify flags a chunk that matches it, --llm-rerank scores it down.")
@llm_threads_option
@context_size_option
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="json (default: the stable object), jsonl (a passage a line), table, or text (passages ready for a prompt).")
@click.option("--detail", type=click.Choice(DETAILS), default=None,
              help="summary (default: passages + a line per phase) or full (every candidate, verdict and stage).")
@click.option("--trace", "full_trace", is_flag=True, help="The full record: --detail full (JSON unless --format is given).")
@click.option("--json", "legacy", flag_value="json", default=None, hidden=True)
@click.option("--table", "legacy", flag_value="table", hidden=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write the result here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def select(
    chunks_file: str | None,
    index_dir: str | None,
    query: str | None,
    rationale_texts: tuple[str, ...],
    rationale_files: tuple[str, ...],
    use_query_as_rationale: bool,
    expansion_window: int | None,
    elbow_z: float,
    no_ecse: bool,
    k_init: int | None,
    scoring: str | None,
    lexical_scorer: str | None,
    pooled_z: float | None,
    cover_z: float | str | None,
    token_cover: float | str | None,
    verification: str | None,
    tau: float | None,
    n_min: int | None,
    theta: float | None,
    t_max: int | None,
    oversize: str,
    tokenizer: str | None,
    bundle: str | None,
    threads: int,
    precision: str,
    generate_rationales: bool,
    num_rationales: int,
    rationale_prompt: str,
    sample_shots: str | None,
    domain: str | None,
    llm_verify: bool,
    verify_batch: int | None,
    llm_rerank: bool,
    reject_rules: tuple[str, ...],
    llm_threads: int,
    context_size: int | None,
    fmt: str | None,
    detail: str | None,
    full_trace: bool,
    legacy: str | None,
    output: str | None,
    compact: bool,
) -> None:
    """Select the evidence worth sending to an answer model.

    With --chunks, ECSE selects among the given chunks (and any of --tau/--n-min/--theta/--t-max
    adds that phase). With --index, the whole pipeline runs over a local index or a Milvus
    collection: kNN, ECSE, verification, BM25 fallback, de-duplication and the token budget.

    Prints every selected passage with its id, source, offsets, score, tokens and metadata,
    and one summary line per phase; --trace gives the full record. --chunks - reads stdin.
    Over an index built with --bundle, that bundle is used unless --bundle is given.

    \b
    Examples:
      meteora-edge select --chunks examples/contract_clauses.json --query "Who may terminate?"
      meteora-edge select --index corpus.idx --query "Who may terminate?" --format text
      cat chunks.jsonl | meteora-edge select --chunks - --query "late fees" --format jsonl
      meteora-edge select --index corpus.idx --query "late fees" --trace -o trace.json
    """
    # 1. options and input files, before anything loads
    if (chunks_file is None) == (index_dir is None):
        raise InputError("give exactly one of --chunks FILE or --index DIR|milvus://…")
    fmt, detail = _output_choice(fmt, legacy, detail, full_trace)
    if output:
        check_output_path(output, inputs=[("--chunks", chunks_file), ("--sample-shots", sample_shots),
                                          ("--tokenizer", tokenizer), *(("--rationales", f) for f in rationale_files)])
    if index_dir and not (query and query.strip()):
        raise InputError("--index needs a non-empty --query")
    chunks = read_chunks_file(chunks_file) if chunks_file else None
    rationale_files, strategy = split_strategy(rationale_files)
    rationales = gather_rationales(query, rationale_texts, rationale_files, use_query_as_rationale)
    if strategy and rationales:
        raise InputError(f"--rationales {strategy} writes the rationales from the query; drop the other rationale options")
    llm_verify = llm_verify or verification == "llm"
    if (sample_shots or domain) and not (generate_rationales or llm_verify):
        raise InputError("--sample-shots and --domain shape the GGUF prompts; add --generate-rationales or --verify")
    settings = {
        "k_init": k_init, "scoring": scoring, "lexical_scorer": lexical_scorer, "pooled_z": pooled_z, "use_ecse": not no_ecse,
        "expansion_window": expansion_window, "elbow_z_threshold": elbow_z, "verification": verification,
        "tau_relevance": tau, "oversize": oversize, "verification_batch": verify_batch,
        **{k: v for k, v in (("n_min", n_min), ("theta_redundancy", theta), ("t_max", t_max)) if v is not None},
        **({} if cover_z is None else {"cover_z": None if cover_z == "off" else cover_z}),
        **({} if token_cover is None else {"token_cover": None if token_cover == "off" else token_cover}),
    }
    try:
        request = SelectRequest(
            query=query, chunks=chunks, rationales=rationales or strategy, detail=detail, settings=settings,
            generate_rationales=generate_rationales, verify=llm_verify, llm_rerank=llm_rerank,
            rationale_prompt=rationale_prompt if generate_rationales else None,
            num_rationales=num_rationales if generate_rationales else None,
            reject=list(reject_rules) or None,
            source=source_name(chunks_file) if chunks_file else None,
        )
        shots = None
        if sample_shots:
            from meteora_edge.selection.sample_shots import check_shots, load_sample_shots

            shots = check_shots(load_sample_shots(sample_shots))
        counter = load_token_counter(tokenizer)
        index = open_index(index_dir) if index_dir else None
        if index is not None:
            bundle = index_bundle(index, bundle, index_dir)  # type: ignore[arg-type]
        loaded = load_bundle(bundle)
        check_llm_bundle(loaded, request.needs_llm)

        # 2. models, cheapest first
        if loaded is None:
            click.echo(HASHING_NOTE, err=True)
        runtime = SelectRuntime.load(
            loaded, tokenizer=counter, threads=threads, precision=precision, cache=not cache_disabled(),
            index_encoder=index.encoder_id if index else None,
            cross_encoder=request.config.verification in ("auto", "cross-encoder"), llm=bool(request.needs_llm),
            llm_threads=llm_threads, context_size=context_size, sample_shots=shots, domain=domain,
        )
        if index is not None:
            check_encoder(index, runtime.encoder, index_dir)  # type: ignore[arg-type]
            request = replace(request, index=index)

        # 3. run and print
        result = runtime.result(request)
    except MeteoraError as exc:
        raise reword(exc, CLI_NAMES) from None
    text, notes = render(result, fmt=fmt, detail=detail, query=query, index_mode=index is not None,
                         chunks_file=request.source, compact=compact,
                         ascii_json=not output and not stdout_is_unicode())
    if output:
        write_text_atomic(output, text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
    for line in notes:
        click.echo(line, err=True)
