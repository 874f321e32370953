"""What ``select`` prints: the JSON object of :mod:`meteora_edge.pipeline.report` in four formats.

The JSON shape (``format: meteora-edge.selection``, ``version: 1``) is the stable machine
interface, built in the library so the ``serve`` API and the adapters return exactly the
same object; here it is printed as JSON, one passage a line, a table or prompt-ready text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from meteora_edge.fileio import escape_line_separators
from meteora_edge.models.analyzer import ANALYZERS, DEFAULT_ANALYZER, Analyzer
from meteora_edge.pipeline.engine import PipelineResult
from meteora_edge.pipeline.report import DETAILS, passage_records, selection_json
from meteora_edge.pipeline.snippets import ELLIPSIS, snippet

__all__ = ["DETAILS", "FORMATS", "render"]

FORMATS = ("json", "jsonl", "table", "text")


def _phase_lines(result: PipelineResult) -> list[str]:
    return [f"{p.name:<11} {p.summary}" for p in result.trace.phases]


def _analyzer(result: PipelineResult) -> Analyzer:
    """The run's analyser (its name is in the trace), for finding the query's terms in a passage."""
    name = str(result.trace.config.get("analyzer") or "").split(":")[0]
    return ANALYZERS.get(name, DEFAULT_ANALYZER)


def _shown(text: str, query: str | None, room: int, analyzer: Analyzer) -> str:
    """The passage's sentence that matches the query, fitted to ``room`` (its first words without a query)."""
    if query:
        return snippet(text, query, width=room, analyzer=analyzer)
    text = " ".join(text.split())
    return text if len(text) <= room else text[: room - 1] + ELLIPSIS


_SOURCE_ROOM = 28  # the table's source column


def _where(row: Mapping[str, Any], *, short: bool = False) -> str:
    source = str(row["source"] or "-")
    if short and len(source) > 20:
        # the table shows the file and its folder (a folder of packages holds many a README or
        # copyright), or the name alone when both do not fit; JSON and text keep the path
        path = PurePath(source)
        both = f"{path.parent.name}/{path.name}" if path.parent.name else path.name
        source = both if len(both) <= _SOURCE_ROOM - 10 else path.name
    meta = row.get("metadata")
    page = meta.get("page") if isinstance(meta, Mapping) else None
    if isinstance(page, int) and not isinstance(page, bool):
        source += f"#page={page}"  # a PDF page, as PDF viewers take it in a link
    if row["start_pos"] is not None and row["end_pos"] is not None:
        source += f":{row['start_pos']}-{row['end_pos']}"
    return source


def render(
    result: PipelineResult,
    *,
    fmt: str,
    detail: str,
    query: str | None,
    index_mode: bool,
    chunks_file: str | None,
    compact: bool = False,
    width: int = 120,
    ascii_json: bool = False,
) -> tuple[str, list[str]]:
    """The text for stdout (or ``--output``) and the lines for stderr, for one format.

    ``json``: the object of :func:`selection_json`. ``jsonl``: one passage record a line (the
    phase summaries go to stderr). ``table``: a row per passage — its sentence that matches the
    query (:func:`~meteora_edge.pipeline.snippets.snippet`) — and a line per phase (``full``:
    the trace table with every candidate). ``text``: each passage under a citation header (and,
    when the matching sentence is not its first, a ``match:`` line quoting it), ready to paste
    into a prompt (phase summaries to stderr). ``ascii_json`` writes JSON with
    ``\\u`` escapes, for a terminal that is not Unicode.
    """
    if fmt == "json":
        data = selection_json(result, query=query, index_mode=index_mode, default_source=chunks_file,
                              detail=detail)
        return escape_line_separators(json.dumps(data, ensure_ascii=ascii_json, indent=None if compact else 2)) + "\n", []
    rows = passage_records(result, index_mode=index_mode, default_source=chunks_file, detail=detail)
    if fmt == "jsonl":
        return "".join(escape_line_separators(json.dumps(r, ensure_ascii=ascii_json)) + "\n" for r in rows), _phase_lines(result)
    if fmt == "table":
        if detail == "full":
            return result.trace.to_table(width=width) + "\n\ncontext:\n" + (result.context or "(empty)") + "\n", []
        return _table(rows, result, query, width), []
    analyzer = _analyzer(result)
    blocks = []
    for r in rows:
        header = f"[{r['rank']}] id {r['id']} · {_where(r)} · score {r['score']:.3f} · {r['tokens']} tokens"
        match = _shown(r["text"], query, width, analyzer)
        if match.startswith(ELLIPSIS):
            header += f"\nmatch: {match}"
        blocks.append(f"{header}\n{r['text']}")
    text = "\n\n".join(blocks) + "\n" if blocks else ""
    extra = [result.trace.to_table(width=width)] if detail == "full" else []
    return text, extra + _phase_lines(result)


def _table(rows: Sequence[Mapping[str, Any]], result: PipelineResult, query: str | None, width: int) -> str:
    selection = result.trace.phase("selection").details
    lines = [f"query: {query}"] if query else []
    for r in selection["rationales"]:
        line = f"rationale {r['index']} ({selection['rationale_source']}): " + (f"[{r['label']}] " if r["label"] else "")
        line += r["text"] + (f" | flag: {r['flag_instructions']}" if r["flag_instructions"] else "")
        lines.append(line if len(line) <= width else line[: width - 1] + "…")
    header = f"{'#':>3} {'id':>6} {'score':>7} {'tok':>5}  {'source':<{_SOURCE_ROOM}} text (the sentence that matches)"
    lines += [header, "-" * len(header)]
    analyzer = _analyzer(result)
    for r in rows:
        where = _where(r, short=True)
        where = where if len(where) <= _SOURCE_ROOM else "…" + where[-(_SOURCE_ROOM - 1):]
        room = max(20, width - 56)  # the columns before the text take 55 characters
        lines.append(f"{r['rank']:>3} {str(r['id']):>6} {r['score']:7.3f} {str(r['tokens']):>5}  {where:<{_SOURCE_ROOM}} "
                     f"{_shown(r['text'], query, room, analyzer)}")
    if not rows:
        lines.append("(no passage selected)")
    lines += ["", f"{len(rows)} passage{'' if len(rows) == 1 else 's'}, {result.tokens} tokens"] + _phase_lines(result)
    return "\n".join(lines) + "\n"
