"""METEORA's DPO record shapes, read into this package's two record forms.

METEORA's preference examples name their fields differently; :func:`meteora_record` maps
them (the caller's record is never modified):

* query: ``query``, ``question``, ``input`` or ``prompt``;
* preferred rationales: ``effective_rationales``, ``preferred_rationales``,
  ``chosen_rationales``, ``positive_rationales``, ``winning_rationales`` — a list of
  rationales that together form *one* completion (``preferred: [that list]`` here); rejected
  ones under ``ineffective_``/``rejected_``/``dispreferred_``/``negative_``/``losing_rationales``;
* candidates: ``rationale_candidates`` or ``candidate_rationales``, each one rationale
  (``text``/``rationale``/``content``) with the chunks it selected (``selected_chunks``,
  ``selected_indices``, ``chunk_indices`` or ``chunk_index``), and the gold ids under
  ``correct_chunks`` or ``gold_chunks``. As in METEORA, the rationales whose chunks hit gold
  form the preferred completion and the others the rejected one (one pair; none when a side
  is empty);
* evidence: ``evidence``, ``oracle_evidence``, ``gold_evidence``, ``context`` or
  ``answer_evidence`` (text), or ``document_chunks``/``chunks`` with the gold ids.

Chunk ids may be integers, ``"1, 2"`` strings or objects with ``index``/``chunk_index``/``id``.
Records already in this package's form pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InputError

__all__ = ["meteora_record", "PREFERRED_KEYS", "REJECTED_KEYS", "QUERY_KEYS"]

QUERY_KEYS = ("query", "question", "input", "prompt")
PREFERRED_KEYS = ("effective_rationales", "preferred_rationales", "chosen_rationales", "positive_rationales",
                  "winning_rationales")
REJECTED_KEYS = ("ineffective_rationales", "rejected_rationales", "dispreferred_rationales", "negative_rationales",
                 "losing_rationales")
CANDIDATE_KEYS = ("rationale_candidates", "candidate_rationales")
GOLD_KEYS = ("gold", "correct_chunks", "gold_chunks")
SELECTED_KEYS = ("selected", "selected_chunks", "selected_indices", "chunk_indices", "chunk_index")
TEXT_KEYS = ("rationales", "text", "rationale", "content", "response")
EVIDENCE_KEYS = ("evidence", "oracle_evidence", "gold_evidence", "context", "answer_evidence")
CHUNK_KEYS = ("chunks", "document_chunks")


def _first(record: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for key in keys:
        if record.get(key) not in (None, "", [], {}):
            return key, record[key]
    return None, None


def _ids(value: object, where: str) -> list[int | str]:
    """Chunk ids from an int, a ``"1, 2"`` string, or a list of ids / objects with an id."""
    if isinstance(value, bool):
        raise InputError(f"{where}: chunk ids must be integers or strings, got {value!r}")
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        parts = [p.strip() for p in value.replace(";", ",").split(",") if p.strip()]
        return [int(p) if p.lstrip("-").isdigit() else p for p in parts]
    if not isinstance(value, list):
        raise InputError(f"{where}: chunk ids must be a list, an integer or a '1, 2' string, got {type(value).__name__}")
    out: list[int | str] = []
    for item in value:
        if isinstance(item, Mapping):
            key = next((k for k in ("index", "chunk_index", "id") if k in item), None)
            if key is None:
                raise InputError(f"{where}: a chunk object has no 'index', 'chunk_index' or 'id'")
            item = item[key]
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise InputError(f"{where}: chunk ids must be integers or strings, got {item!r}")
        out.append(item)
    return out


def _chunk_text(item: object) -> object:
    if isinstance(item, Mapping):
        return next((item[k] for k in ("text", "content", "page_content") if isinstance(item.get(k), str)), item)
    return item


def _meteora_candidates(candidates: object, gold: list[int | str], where: str) -> list[dict[str, Any]]:
    """METEORA's one-rationale candidates as two rationale sets: gold-hitting vs the rest."""
    if not isinstance(candidates, list):
        raise InputError(f"{where}: rationale candidates must be a list")
    hitting: tuple[list[Any], list[Any]] = ([], [])
    missing: tuple[list[Any], list[Any]] = ([], [])
    for i, candidate in enumerate(candidates):
        if not isinstance(candidate, Mapping):
            raise InputError(f"{where}: candidate {i} must be an object with a rationale text")
        _, text = _first(candidate, TEXT_KEYS)
        key, selected = _first(candidate, SELECTED_KEYS)
        if text is None:
            raise InputError(f"{where}: candidate {i} has no 'text' (or 'rationale'/'content')")
        chosen = _ids(selected, f"{where}: candidate {i}") if key else []
        side = hitting if set(chosen) & set(gold) else missing
        side[0].append(text)
        side[1].extend(chosen)
    return [{"rationales": texts, "selected": list(dict.fromkeys(ids))} for texts, ids in (hitting, missing) if texts]


def meteora_record(record: Mapping[str, Any], *, position: int = 0) -> dict[str, Any]:
    """Map a METEORA-style preference example onto this package's record forms (see the module doc).

    Raises:
        InputError: an alias holds a value of the wrong kind (naming the record).
    """
    where = f"record {position}"
    out = dict(record)
    if not isinstance(out.get("query"), str):
        key, query = _first(record, QUERY_KEYS)
        if isinstance(query, str):
            out["query"] = query
    if "gold" not in out:
        key, gold = _first(record, GOLD_KEYS)
        if key:
            out["gold"] = _ids(gold, f"{where}: '{key}'")
    for ours, keys in (("preferred", PREFERRED_KEYS), ("rejected", REJECTED_KEYS)):
        key, value = _first(record, keys)
        if ours not in out and key:
            out[ours] = [value]  # METEORA: the list of rationales is one completion
    key, candidates = _first(record, CANDIDATE_KEYS)
    if key and "candidates" not in out and "preferred" not in out:
        out["candidates"] = _meteora_candidates(candidates, out.get("gold", []), where)
        out.setdefault("gold", [])
    elif isinstance(out.get("candidates"), list):
        out["candidates"] = [_our_candidate(c) for c in out["candidates"]]
    key, evidence = _first(record, EVIDENCE_KEYS)
    if key and not isinstance(out.get("evidence"), list):
        out["evidence"] = [evidence] if isinstance(evidence, str) else evidence
    key, chunks = _first(record, CHUNK_KEYS)
    if key:
        out["chunks"] = [_chunk_text(c) for c in chunks] if isinstance(chunks, list) else chunks
    return out


def _our_candidate(candidate: object) -> object:
    """This package's candidate form, with METEORA's names for its two keys."""
    if not isinstance(candidate, Mapping) or ("rationales" in candidate and "selected" in candidate):
        return candidate
    out = dict(candidate)
    key, text = _first(candidate, TEXT_KEYS)
    if "rationales" not in out and key:
        out["rationales"] = text
    key, selected = _first(candidate, SELECTED_KEYS)
    if "selected" not in out and key:
        out["selected"] = _ids(selected, "candidate")
    return out
