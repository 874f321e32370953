"""``select``'s inputs: rationale files, and the flag of each request key (for the library's messages)."""

from __future__ import annotations

import json
from pathlib import Path

from meteora_edge.documents import check_unicode
from meteora_edge.errors import InputError
from meteora_edge.fileio import DuplicateKeyError, loads_json, read_json_file, read_text_file
from meteora_edge.pipeline.config import RATIONALE_STRATEGIES
from meteora_edge.selection.rationales import Rationale, as_rationales, parse_rationales

WINDOW_HELP = (
    "Neighbours added on each side of every chunk ECSE selects (METEORA's expansion). "
    "Default: 1 when --chunks is one ordered document (every chunk has start_pos/end_pos offsets "
    "from one source, as 'meteora-edge chunk' writes them), else 0: for independent passages "
    "or kNN results a neighbour is noise."
)

#: each request key (and library parameter) as ``select`` spells it, put in place of ``'key'`` in messages
CLI_NAMES = {
    "query": "--query", "chunks": "--chunks", "index": "--index", "rationales": "--rationale/--rationales",
    "detail": "--detail", "generate_rationales": "--generate-rationales", "verify": "--verify",
    "llm_rerank": "--llm-rerank", "rationale_prompt": "--rationale-prompt", "num_rationales": "--num-rationales",
    "reject": "--reject",
    "bundle": "--bundle", "k_init": "--k-init", "scoring": "--scoring", "lexical_scorer": "--lexical-scorer", "pooled_z": "--pooled-z", "cover_z": "--cover-z",
    "token_cover": "--token-cover",
    "use_ecse": "--no-ecse", "expansion_window": "--expansion-window", "elbow_z_threshold": "--elbow-z",
    "verification": "--verification", "tau_relevance": "--tau", "verification_batch": "--verify-batch",
    "n_min": "--n-min", "theta_redundancy": "--theta", "t_max": "--t-max", "oversize": "--oversize",
}


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
            data = loads_json(text)
        except DuplicateKeyError as exc:
            raise InputError(f"{path} is ambiguous: {exc}") from None
        except (json.JSONDecodeError, RecursionError):
            return parse_rationales(text)  # "[Label] …" is tagged text, not broken JSON
        return _rationales_from_json(data, path)
    return parse_rationales(text)


def split_strategy(files: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """``--rationales auto``/``query``/``llm+auto`` name a strategy, not a file: (the files, the strategy or None)."""
    strategies = [f for f in files if f in RATIONALE_STRATEGIES]
    if len(set(strategies)) > 1:
        raise InputError("give one of --rationales auto, query or llm+auto, not several")
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
    for i, r in enumerate(collected, start=1):
        for part in (r.text, r.label, r.flag_instructions):
            if part:
                check_unicode(part, f"rationale {i}")
    return [Rationale(r.text, i, r.label, r.flag_instructions) for i, r in enumerate(collected, start=1)]
