"""``select``'s inputs: rationale files, the expansion-window default and the pipeline settings."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from meteora_edge.errors import InputError
from meteora_edge.fileio import read_json_file, read_text_file
from meteora_edge.pipeline.config import RATIONALE_STRATEGIES, PipelineConfig
from meteora_edge.selection.rationales import Rationale, as_rationales, parse_rationales

WINDOW_HELP = (
    "Neighbours added on each side of every chunk ECSE selects (METEORA's expansion). "
    "Default: 1 when --chunks is one ordered document (every chunk has start_pos/end_pos offsets "
    "from one source, as 'meteora-edge chunk' writes them), else 0: for independent passages "
    "or kNN results a neighbour is noise."
)


def _rationales_from_json(data: object, path: str) -> list[Rationale]:
    if isinstance(data, dict):
        if "rationales" in data:
            data = data["rationales"]
        elif isinstance(data.get("response"), str):  # METEORA: {"response": "<rationale_1>…"}
            data = data["response"]
        else:
            raise InputError(f"{path} holds an object without 'rationales' or 'response'")
    return as_rationales(data)


def load_rationales(path: str) -> list[Rationale]:
    """Rationales from a file: JSON (a list, ``{"rationales": …}`` or ``{"response": "<rationale_1>…"}``)
    or text in any form :func:`parse_rationales` reads — including text that starts with ``[Label]``."""
    if Path(path).suffix.lower() == ".json":
        return _rationales_from_json(read_json_file(path), path)
    text = read_text_file(path)
    if text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return parse_rationales(text)  # "[Label] …" is tagged text, not broken JSON
        return _rationales_from_json(data, path)
    return parse_rationales(text)


def split_strategy(files: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """``--rationales auto``/``query`` name a strategy, not a file: (the files, the strategy or None)."""
    strategies = [f for f in files if f in RATIONALE_STRATEGIES]
    if len(set(strategies)) > 1:
        raise InputError("give one of --rationales auto or --rationales query, not both")
    return tuple(f for f in files if f not in RATIONALE_STRATEGIES), strategies[0] if strategies else None


def gather_rationales(
    query: str | None, texts: tuple[str, ...], files: tuple[str, ...], use_query: bool
) -> list[Rationale]:
    """Rationales from --rationale, --rationales (and the query on request), renumbered 1..N.

    Empty when only a query is given: the pipeline then generates rationales, writes them by
    rule (``auto``) or uses the query.
    """
    collected: list[Rationale] = []
    for text in texts:
        collected += as_rationales([text])
    for path in files:
        found = load_rationales(path)
        if not found:
            raise InputError(f"{path} holds no rationale")
        collected += found
    has_query = bool(query and query.strip())
    if use_query and not has_query:
        raise InputError("--use-query-as-rationale needs a non-empty --query")
    if not collected and not has_query:
        raise InputError("no rationale and no query; give --rationale TEXT, --rationales FILE or --query Q")
    if has_query and use_query:
        collected.append(Rationale(text=" ".join(query.split())))  # type: ignore[union-attr]
    return [Rationale(r.text, i, r.label, r.flag_instructions) for i, r in enumerate(collected, start=1)]


def _offsets_and_source(chunk: object) -> tuple[int, int, object] | None:
    if not isinstance(chunk, Mapping):
        return None
    start = chunk.get("start_pos", chunk.get("start"))
    end = chunk.get("end_pos", chunk.get("end"))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return None
    meta = chunk.get("metadata")
    source = chunk.get("source") or (meta.get("source") if isinstance(meta, Mapping) else None)
    return start, end, source  # type: ignore[return-value]


def is_ordered_document(chunks: Sequence[object]) -> bool:
    """Whether the chunks are consecutive pieces of one document: every chunk has integer
    offsets, all name the same source (or none), and the offsets never go backwards."""
    spans = [_offsets_and_source(c) for c in chunks]
    if len(spans) < 2 or any(s is None for s in spans):
        return False
    if len({s[2] for s in spans}) != 1:  # type: ignore[index]
        return False
    return all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(spans, spans[1:]))  # type: ignore[index]


def default_window(chunks: Sequence[object] | None) -> int:
    """The expansion window when none is given (see :data:`WINDOW_HELP`)."""
    return 1 if chunks is not None and is_ordered_document(chunks) else 0


def pipeline_config(
    from_index: bool,
    *,
    k_init: int | None,
    expansion_window: int,
    elbow_z: float,
    verification: str | None,
    tau: float | None,
    n_min: int | None,
    theta: float | None,
    t_max: int | None,
    oversize: str,
    no_ecse: bool,
    scoring: str | None = None,
    strategy: str | None = None,
    pooled_z: float | None = None,
) -> PipelineConfig:
    """Index runs use the pipeline defaults; given chunks run only the phases asked for."""
    base = PipelineConfig() if from_index else PipelineConfig(n_min=None, theta_redundancy=None, t_max=None)
    return PipelineConfig(
        k_init=base.k_init if k_init is None else k_init,
        scoring=base.scoring if scoring is None else scoring,
        rationales=base.rationales if strategy is None else strategy,
        pooled_z=base.pooled_z if pooled_z is None else pooled_z,
        use_ecse=not no_ecse,
        expansion_window=expansion_window,
        elbow_z_threshold=elbow_z,
        verification=verification or ("auto" if from_index or tau is not None else "none"),
        tau_relevance=base.tau_relevance if tau is None else tau,
        n_min=base.n_min if n_min is None else n_min,
        theta_redundancy=base.theta_redundancy if theta is None else theta,
        t_max=base.t_max if t_max is None else t_max,
        oversize=oversize,
    )
