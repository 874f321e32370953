"""A pipeline result as the JSON object the CLI, the server and the adapters share.

The shape (``format: meteora-edge.selection``, ``version: 1``) is the stable machine
interface: ``meteora-edge select --format json`` prints it, ``POST /v1/select`` and
``serve --stdio`` answer with it, and the LangChain / LlamaIndex adapters expose it. Every id
in it is a *chunk id*: the chunk's position in the given chunks, or the index's chunk id.
Only the trace's candidate records also give a ``candidate`` position (the kNN rank), next
to ``chunk_id``.

Example:
    >>> from meteora_edge import EvidencePipeline, PipelineConfig
    >>> result = EvidencePipeline(PipelineConfig(verification="none")).run(
    ...     "who may terminate?", passages=["Either party may terminate.", "Fees are monthly."])
    >>> data = selection_json(result, query="who may terminate?", index_mode=False)
    >>> data["passages"][0]["text"], data["passages"][0]["id"]
    ('Either party may terminate.', 0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..index.content_hashes import record_file
from .engine import PipelineResult
from .trace import CandidateRecord

__all__ = ["FORMAT", "VERSION", "DETAILS", "passage_records", "selection_json", "ecse_details_by_id"]

FORMAT = "meteora-edge.selection"
VERSION = 1
DETAILS = ("summary", "full")
_TEXT_KEYS = ("text", "content", "page_content")
_OWN_KEYS = (*_TEXT_KEYS, "metadata", "start_pos", "end_pos", "start", "end", "source")


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _origin(document: object, index_mode: bool, default_source: str | None) -> dict[str, Any]:
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
        source = document.get("source") or (own.get("source") if isinstance(own, Mapping) else None) or default_source
        return {"source": source, "document": None,
                "start_pos": _int_or_none(document.get("start_pos", document.get("start"))),
                "end_pos": _int_or_none(document.get("end_pos", document.get("end"))), "metadata": meta}
    own = getattr(document, "metadata", None)  # a Chunk, a LangChain Document, a LlamaIndex node
    meta = dict(own) if isinstance(own, Mapping) else {}
    return {"source": meta.get("source") or default_source, "document": None, "start_pos": None, "end_pos": None,
            "metadata": meta}


def _phase_scores(record: CandidateRecord | None) -> dict[str, float]:
    if record is None:
        return {}
    named = {"retrieval": record.retrieval_score, "dense": record.dense_score, "lexical": record.lexical_score,
             "selection": record.ecse_score, "relevance": record.relevance, "bm25": record.bm25_score}
    return {k: round(v, 6) for k, v in named.items() if v is not None}


def passage_records(
    result: PipelineResult, *, index_mode: bool, default_source: str | None = None, detail: str = "summary"
) -> list[dict[str, Any]]:
    """One record per selected passage, in context order (rank 1 first).

    Args:
        result: what :meth:`EvidencePipeline.run` returned.
        index_mode: the candidates came from an index (its documents are the stored records).
        default_source: the ``source`` of a given chunk that names none (the CLI passes the
            ``--chunks`` file; the server and the adapters pass nothing).
        detail: ``"summary"`` or ``"full"``.

    Returns:
        Records with ``rank``, ``id`` (chunk id), ``text`` (as it enters the context),
        ``source``, ``document``, ``start_pos``/``end_pos`` (null when unknown), ``score`` (the
        priority score the pipeline ordered by) and ``score_name`` (which score that is),
        ``tokens``, ``metadata``; with ``detail="full"`` also ``scores`` (one per phase), ``via``
        (``selection`` or ``fallback``), ``chosen_by`` (the rule that chose it, see
        :class:`~meteora_edge.pipeline.trace.CandidateRecord`) and the ``verdict``.
    """
    by_id = {c.chunk_id: c for c in result.trace.candidates}
    names = list(getattr(result, "score_names", None) or [None] * len(result.ids))
    out = []
    for rank, (chunk_id, text, document, score, name) in enumerate(
        zip(result.ids, result.passages, result.documents, result.scores, names), start=1
    ):
        record = by_id.get(chunk_id)
        row = {"rank": rank, "id": chunk_id, "text": text, **_origin(document, index_mode, default_source),
               "score": round(score, 6), "score_name": name, "tokens": record.tokens if record is not None else None}
        row["metadata"] = row.pop("metadata")  # keep metadata last: it is the caller's, of any size
        if detail == "full":
            row["scores"] = _phase_scores(record)
            row["via"] = "fallback" if record is not None and record.via_fallback else "selection"
            row["chosen_by"] = record.chosen_by if record is not None else None
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
    default_source: str | None = None,
    detail: str = "summary",
) -> dict[str, Any]:
    """The result as the stable JSON object (see the module doc and docs/cli.md).

    Args:
        result: what :meth:`EvidencePipeline.run` returned.
        query: the question as the caller gave it (``None`` when only rationales were given).
        index_mode, default_source, detail: as :func:`passage_records`; ``detail="full"`` adds
            ``selected_indices``, ECSE's stage ``details``, every ``verdict`` and the ``trace``.

    Returns:
        A JSON-ready dict: ``format``, ``version``, ``query``, ``passages``, ``tokens``,
        ``phases``, ``rationales``, ``rationale_source``, ``encoder`` (and the full record).
    """
    trace = result.trace
    selection = trace.phase("selection").details
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "query": query,
        "passages": passage_records(result, index_mode=index_mode, default_source=default_source, detail=detail),
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
