"""What ``select`` prints: one passage record per selected chunk, in four formats, two levels of detail.

The JSON shape (``format: meteora-edge.selection``, ``version: 1``) is the stable machine
interface; a ``serve`` API returns exactly this object. Every id in it is a *chunk id*: the
chunk's position in the ``--chunks`` file, or the index's chunk id with ``--index``. Only the
trace's candidate records also give a ``candidate`` position (the kNN rank), next to ``chunk_id``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

from meteora_edge.index.content_hashes import record_file
from meteora_edge.pipeline.engine import PipelineResult
from meteora_edge.pipeline.trace import CandidateRecord

FORMAT = "meteora-edge.selection"
VERSION = 1
FORMATS = ("json", "jsonl", "table", "text")
DETAILS = ("summary", "full")
_TEXT_KEYS = ("text", "content", "page_content")
_OWN_KEYS = (*_TEXT_KEYS, "metadata", "start_pos", "end_pos", "start", "end", "source")


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _origin(document: object, index_mode: bool, chunks_file: str | None) -> dict[str, Any]:
    """Source, document id, offsets and the caller's metadata of one selected document."""
    if index_mode and isinstance(document, Mapping):
        meta = document.get("metadata")
        return {"source": record_file(dict(document)), "document": document.get("source"),
                "start_pos": _int_or_none(document.get("start")), "end_pos": _int_or_none(document.get("end")),
                "metadata": dict(meta) if isinstance(meta, Mapping) else {}}
    if isinstance(document, Mapping):
        own = document.get("metadata")
        meta = {str(k): v for k, v in document.items() if k not in _OWN_KEYS}
        meta.update(own if isinstance(own, Mapping) else {})
        source = document.get("source") or (own.get("source") if isinstance(own, Mapping) else None) or chunks_file
        return {"source": source, "document": None,
                "start_pos": _int_or_none(document.get("start_pos", document.get("start"))),
                "end_pos": _int_or_none(document.get("end_pos", document.get("end"))), "metadata": meta}
    own = getattr(document, "metadata", None)
    return {"source": chunks_file, "document": None, "start_pos": None, "end_pos": None,
            "metadata": dict(own) if isinstance(own, Mapping) else {}}


def _phase_scores(record: CandidateRecord | None) -> dict[str, float]:
    if record is None:
        return {}
    named = {"retrieval": record.retrieval_score, "dense": record.dense_score, "lexical": record.lexical_score,
             "selection": record.ecse_score, "relevance": record.relevance, "bm25": record.bm25_score}
    return {k: round(v, 6) for k, v in named.items() if v is not None}


def passage_records(
    result: PipelineResult, *, index_mode: bool, chunks_file: str | None, detail: str = "summary"
) -> list[dict[str, Any]]:
    """One record per selected passage, in context order (rank 1 first).

    Keys: ``rank``, ``id`` (chunk id), ``text`` (as it enters the context), ``source``,
    ``document``, ``start_pos``/``end_pos`` (null when unknown), ``score`` (the priority score the
    pipeline ordered by) and ``score_name`` (which score that is), ``tokens``, ``metadata``; with
    ``detail="full"`` also ``scores`` (one per phase), ``via`` (``selection`` or ``fallback``)
    and the ``verdict``.
    """
    by_id = {c.chunk_id: c for c in result.trace.candidates}
    names = list(getattr(result, "score_names", None) or [None] * len(result.ids))
    out = []
    for rank, (chunk_id, text, document, score, name) in enumerate(
        zip(result.ids, result.passages, result.documents, result.scores, names), start=1
    ):
        record = by_id.get(chunk_id)
        row = {"rank": rank, "id": chunk_id, "text": text, **_origin(document, index_mode, chunks_file),
               "score": round(score, 6), "score_name": name, "tokens": record.tokens if record is not None else None}
        row["metadata"] = row.pop("metadata")  # keep metadata last: it is the caller's, of any size
        if detail == "full":
            row["scores"] = _phase_scores(record)
            row["via"] = "fallback" if record is not None and record.via_fallback else "selection"
            row["verdict"] = _verdict_by_id(record.verdict, record.chunk_id) if record and record.verdict else None
        out.append(row)
    return out


def _verdict_by_id(verdict: Mapping[str, Any], chunk_id: Any) -> dict[str, Any]:
    return {**verdict, "chunk_index": chunk_id}


def _ids_of(result: PipelineResult) -> Callable[[Any], Any]:
    by_position = {c.candidate: c.chunk_id for c in result.trace.candidates}
    return lambda position: by_position.get(position, position)


def ecse_details_by_id(details: Mapping[str, Any], to_id: Callable[[Any], Any]) -> dict[str, Any]:
    """ECSE's stage details with candidate positions replaced by chunk ids (one id space)."""
    if not details:
        return {}
    out = dict(details)
    for key in ("pairing_indices", "pooled_indices", "expansion_indices"):
        if key in out:
            out[key] = [to_id(p) for p in out[key]]
    if "rationale_matches" in out:
        out["rationale_matches"] = [{**m, "chunk_index": to_id(m["chunk_index"])} for m in out["rationale_matches"]]
    if "pooled_scores" in out:
        out["pooled_scores"] = {str(to_id(p)): s for p, s in enumerate(out["pooled_scores"])}
    if "rationale_contributions" in out:
        out["rationale_contributions"] = {str(to_id(int(p))): r for p, r in out["rationale_contributions"].items()}
    return out


def selection_json(
    result: PipelineResult,
    *,
    query: str | None,
    index_mode: bool,
    chunks_file: str | None,
    detail: str = "summary",
) -> dict[str, Any]:
    """The ``select`` result as the stable JSON object (see the module doc and the README)."""
    trace = result.trace
    selection = trace.phase("selection").details
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "query": query,
        "passages": passage_records(result, index_mode=index_mode, chunks_file=chunks_file, detail=detail),
        "tokens": result.tokens,
        "phases": [{"name": p.name, "summary": p.summary, "ms": round(p.ms, 3)} for p in trace.phases],
        "rationales": selection["rationales"],
        "rationale_source": selection["rationale_source"],
        "encoder": trace.config["encoder"],
    }
    if detail == "full":
        to_id = _ids_of(result)
        full_trace = trace.to_dict()
        for phase in full_trace["phases"]:
            if phase["name"] == "selection" and phase["details"].get("ecse"):
                phase["details"] = {**phase["details"], "ecse": ecse_details_by_id(phase["details"]["ecse"], to_id)}
        data.update({
            "selected_indices": sorted(result.ids),
            "details": ecse_details_by_id(selection.get("ecse", {}), to_id),
            "verdicts": [_verdict_by_id(c.verdict, c.chunk_id) for c in trace.candidates if c.verdict is not None],
            "trace": full_trace,
        })
    return data


def _phase_lines(result: PipelineResult) -> list[str]:
    return [f"{p.name:<11} {p.summary}" for p in result.trace.phases]


def _where(row: Mapping[str, Any], *, short: bool = False) -> str:
    source = str(row["source"] or "-")
    if short and len(source) > 20:
        source = PurePath(source).name  # the table shows the file name; JSON keeps the path
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
) -> tuple[str, list[str]]:
    """The text for stdout (or ``--output``) and the lines for stderr, for one format.

    ``json``: the object of :func:`selection_json`. ``jsonl``: one passage record a line (the
    phase summaries go to stderr). ``table``: a row per passage and a line per phase (``full``:
    the trace table with every candidate). ``text``: each passage under a citation header,
    ready to paste into a prompt (phase summaries to stderr).
    """
    if fmt == "json":
        data = selection_json(result, query=query, index_mode=index_mode, chunks_file=chunks_file, detail=detail)
        return json.dumps(data, ensure_ascii=False, indent=None if compact else 2) + "\n", []
    rows = passage_records(result, index_mode=index_mode, chunks_file=chunks_file, detail=detail)
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), _phase_lines(result)
    if fmt == "table":
        if detail == "full":
            return result.trace.to_table(width=width) + "\n\ncontext:\n" + (result.context or "(empty)") + "\n", []
        return _table(rows, result, query, width), []
    blocks = [f"[{r['rank']}] id {r['id']} · {_where(r)} · score {r['score']:.3f} · {r['tokens']} tokens\n{r['text']}"
              for r in rows]
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
    header = f"{'#':>3} {'id':>6} {'score':>7} {'tok':>5}  {'source':<28} text"
    lines += [header, "-" * len(header)]
    for r in rows:
        where = _where(r, short=True)
        where = where if len(where) <= 28 else "…" + where[-27:]
        room = max(20, width - len(header) + 4)
        text = " ".join(r["text"].split())
        lines.append(f"{r['rank']:>3} {str(r['id']):>6} {r['score']:7.3f} {str(r['tokens']):>5}  {where:<28} "
                     f"{text if len(text) <= room else text[: room - 1] + '…'}")
    if not rows:
        lines.append("(no passage selected)")
    lines += ["", f"{len(rows)} passage{'' if len(rows) == 1 else 's'}, {result.tokens} tokens"] + _phase_lines(result)
    return "\n".join(lines) + "\n"
