"""``select`` (evidence selection over given chunks or a local index) and ``chunk``."""

from __future__ import annotations

from pathlib import Path

import click

from meteora_edge.pipeline.budget import load_token_counter
from meteora_edge.index.chunking import chunk_text
from meteora_edge.documents import document_texts
from meteora_edge.errors import InputError
from meteora_edge.fileio import read_chunks_file, read_json_file, read_text_file, write_text_atomic
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.pipeline.engine import EvidencePipeline, PipelineConfig
from meteora_edge.selection.rationales import Rationale, as_rationales, parse_rationales

from .encoder_option import (
    bundle_option,
    cache_option,
    cross_encoder_from_options,
    encoder_from_options,
    precision_option,
    threads_option,
)
from .llm_options import llm_roles
from .output import emit_json


def _load_rationales(path: str) -> list[Rationale]:
    text = read_text_file(path)
    if path.endswith(".json") or text.lstrip().startswith("["):
        data = read_json_file(path)
        if isinstance(data, dict) and "rationales" in data:
            data = data["rationales"]
        return as_rationales(data)
    return parse_rationales(text)


def gather_rationales(
    query: str | None, texts: tuple[str, ...], files: tuple[str, ...], use_query: bool
) -> list[Rationale]:
    """Rationales from --rationale, --rationales (and the query on request), renumbered 1..N.

    Empty when only a query is given: the pipeline then generates rationales or uses the query.
    """
    collected: list[Rationale] = []
    for text in texts:
        collected += as_rationales([text])
    for path in files:
        collected += _load_rationales(path)
    has_query = bool(query and query.strip())
    if use_query and not has_query:
        raise InputError("--use-query-as-rationale needs a non-empty --query")
    if not collected and not has_query:
        raise InputError("no rationale and no query; give --rationale TEXT, --rationales FILE or --query Q")
    if has_query and use_query:
        collected.append(Rationale(text=" ".join(query.split())))  # type: ignore[union-attr]
    return [Rationale(r.text, i, r.label, r.flag_instructions) for i, r in enumerate(collected, start=1)]


def _pipeline_config(
    from_index: bool,
    *,
    k_init: int,
    expansion_window: int | None,
    elbow_z: float,
    verification: str | None,
    tau: float | None,
    n_min: int | None,
    theta: float | None,
    t_max: int | None,
    oversize: str,
    no_ecse: bool,
) -> PipelineConfig:
    """Index runs use the pipeline defaults; given chunks run only the phases asked for."""
    base = PipelineConfig() if from_index else PipelineConfig(expansion_window=1, n_min=None, theta_redundancy=None, t_max=None)
    return PipelineConfig(
        k_init=k_init,
        use_ecse=not no_ecse,
        expansion_window=base.expansion_window if expansion_window is None else expansion_window,
        elbow_z_threshold=elbow_z,
        verification=verification or ("auto" if from_index or tau is not None else "none"),
        tau_relevance=base.tau_relevance if tau is None else tau,
        n_min=base.n_min if n_min is None else n_min,
        theta_redundancy=base.theta_redundancy if theta is None else theta,
        t_max=base.t_max if t_max is None else t_max,
        oversize=oversize,
    )


@click.command()
@click.option("--chunks", "chunks_file", default=None, help="JSON list, {\"chunks\": [...]} or JSONL of candidate chunks.")
@click.option("--index", "index_dir", default=None, type=click.Path(file_okay=False),
              help="Local index folder to retrieve candidates from (kNN).")
@click.option("--query", "-q", default=None, help="The question (used as a rationale when none is given).")
@click.option("--rationale", "rationale_texts", multiple=True, help="A rationale text; repeatable.")
@click.option("--rationales", "rationale_files", multiple=True, help="File of rationales (tagged text or JSON list).")
@click.option("--use-query-as-rationale", is_flag=True, help="Add the query to the given rationales.")
@click.option("--expansion-window", type=click.IntRange(min=0), default=None,
              help="Neighbours added around selected chunks [1 with --chunks, 0 with --index].")
@click.option("--elbow-z", type=float, default=1.0, show_default=True, help="z-score threshold of the pooled elbow.")
@click.option("--no-ecse", is_flag=True, help="Skip ECSE selection (pure MeVe: verify every candidate).")
@click.option("--k-init", type=click.IntRange(min=1), default=20, show_default=True, help="Candidates fetched by kNN.")
@click.option("--verification", type=click.Choice(["auto", "llm", "cross-encoder", "cosine", "none"]), default=None,
              help="Verification rung [auto with --index, or with --chunks and --tau; else none].")
@click.option("--tau", type=float, default=None, help="Relevance threshold of the cross-encoder/cosine rung [0.4].")
@click.option("--n-min", type=click.IntRange(min=0), default=None, help="BM25 fallback below this many chunks [3 with --index].")
@click.option("--theta", type=click.FloatRange(-1.0, 1.0), default=None, help="Near-duplicate cosine [0.85 with --index].")
@click.option("--t-max", type=click.IntRange(min=1), default=None, help="Token budget [512 with --index].")
@click.option("--oversize", type=click.Choice(["drop", "truncate"]), default="drop", show_default=True,
              help="A chunk larger than the whole budget is dropped or cut to fit.")
@click.option("--tokenizer", default=None,
              help="Answer model tokenizer: tokenizer.json, .gguf, a bundle, or 'whitespace' (the default).")
@bundle_option
@threads_option
@precision_option
@cache_option
@click.option("--generate-rationales", is_flag=True, help="Write the rationales with the bundle's GGUF model (needs --query).")
@click.option("--num-rationales", type=click.IntRange(1, 20), default=3, show_default=True, help="Rationales to generate.")
@click.option("--verify", "llm_verify", is_flag=True, help="Judge each selected chunk with the bundle's GGUF model.")
@click.option("--llm-threads", type=click.IntRange(min=1), default=1, show_default=True, help="CPU threads of the GGUF model.")
@click.option("--context-size", type=click.IntRange(min=256), default=None, help="Context of the GGUF model [the bundle's].")
@click.option("--json/--table", "as_json", default=True, help="JSON result (default) or a readable trace table.")
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
    k_init: int,
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
    llm_verify: bool,
    llm_threads: int,
    context_size: int | None,
    as_json: bool,
    output: str | None,
    compact: bool,
) -> None:
    """Select the evidence worth sending to an answer model.

    With --chunks, ECSE selects among the given chunks (and any of --tau/--n-min/--theta/--t-max
    adds that phase). With --index, the whole pipeline runs over a local index: kNN,
    ECSE, verification, BM25 fallback, de-duplication and the token budget.
    """
    if (chunks_file is None) == (index_dir is None):
        raise InputError("give exactly one of --chunks FILE or --index DIR")
    chunks = read_chunks_file(chunks_file) if chunks_file else None
    texts = document_texts(chunks) if chunks is not None else None
    if index_dir and not (query and query.strip()):
        raise InputError("--index needs a non-empty --query")
    rationales = gather_rationales(query, rationale_texts, rationale_files, use_query_as_rationale)
    if generate_rationales and rationales:
        raise InputError("--generate-rationales writes the rationales itself; drop --rationale/--rationales")
    if generate_rationales and not (query and query.strip()):
        raise InputError("--generate-rationales needs a non-empty --query")
    llm_verify = llm_verify or verification == "llm"
    if llm_verify and verification not in (None, "llm", "auto"):
        raise InputError(f"--verify uses the LLM verifier; it conflicts with --verification {verification}")
    verification = "llm" if llm_verify else verification
    rationale_generator, verifier = llm_roles(
        bundle, generate=generate_rationales, verify=llm_verify, threads=llm_threads,
        context_size=context_size, num_rationales=num_rationales,
    )
    config = _pipeline_config(
        index_dir is not None, k_init=k_init, expansion_window=expansion_window, elbow_z=elbow_z,
        verification=verification, tau=tau, n_min=n_min, theta=theta, t_max=t_max, oversize=oversize, no_ecse=no_ecse,
    )
    encoder = encoder_from_options(bundle, threads, precision, index_dir=index_dir)
    index = LocalIndex.load(index_dir, encoder=encoder) if index_dir else None
    pipeline = EvidencePipeline(
        config, encoder=encoder, index=index, rationale_generator=rationale_generator, verifier=verifier,
        cross_encoder=cross_encoder_from_options(bundle, threads) if config.verification in ("auto", "cross-encoder") else None,
        token_counter=load_token_counter(tokenizer),
    )
    result = pipeline.run(query or rationales[0].text, passages=texts, rationales=rationales or None)
    if not as_json:
        table = result.trace.to_table() + "\n\ncontext:\n" + (result.context or "(empty)") + "\n"
        if output:
            write_text_atomic(output, table)
        else:
            click.echo(table, nl=False)
        return
    selection = result.trace.phase("selection").details
    data = {
        "query": query,
        "selected_indices": sorted(result.ids),
        "passages": result.passages,
        "ids": result.ids,
        "scores": [round(s, 6) for s in result.scores],
        "tokens": result.tokens,
        "rationales": selection["rationales"],
        "rationale_source": selection["rationale_source"],
        "encoder": result.trace.config["encoder"],
        "details": selection.get("ecse", {}),
        "verdicts": [c.verdict for c in result.trace.candidates if c.verdict is not None],
        "trace": result.trace.to_dict(),
    }
    if texts is not None:
        data["selected_chunks"] = [texts[i] for i in sorted(result.ids)]
    emit_json(data, output=output, compact=compact)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--chunk-size", type=click.IntRange(min=1), default=256, show_default=True, help="Words per chunk.")
@click.option("--overlap", type=click.IntRange(min=0), default=None, help="Words shared by neighbours [chunk-size // 10].")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="Write JSON here instead of stdout.")
@click.option("--compact", is_flag=True, help="One-line JSON.")
def chunk(file: str, chunk_size: int, overlap: int | None, output: str | None, compact: bool) -> None:
    """Split a text file into overlapping word-window chunks with character offsets."""
    chunks = chunk_text(read_text_file(file), chunk_size, overlap, metadata={"source": Path(file).name})
    emit_json({"chunks": [c.to_dict() for c in chunks]}, output=output, compact=compact)
