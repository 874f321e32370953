"""The verifier protocol: judge each chunk, accept only when relevant and not flagged.

A verifier is a callable ``f(request) -> mapping | JSON text`` or an object with
``.verify(request)``. Its answer must carry boolean ``relevant`` and ``flagged``; anything
else is rejected with flag type ``PARSE_ERROR`` (fail closed). Chunks are judged one at a
time, best first, each with the evidence accepted so far. Errors raised by the model
itself propagate to the caller.

A *batch* verifier (``.verify_batch(requests)``, see :class:`BatchVerifier`) judges several
chunks in one answer: a JSON array (or a list of mappings) with one verdict per chunk,
keyed by ``id`` = the chunk index. :func:`parse_batch_verdicts` reads it chunk by chunk: a
chunk the answer leaves out, or whose verdict is unusable, gets a ``PARSE_ERROR`` verdict of
its own while the others stand. :func:`verify_chunks_batched` feeds the batches in judging
order, each with the evidence accepted in the batches before it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union, runtime_checkable

from ..errors import InputError
from .rationales import Rationale

__all__ = [
    "Verdict",
    "VerificationRequest",
    "Verifier",
    "VerifierLike",
    "parse_verdict",
    "verify_chunks",
    "BatchVerifier",
    "parse_batch_verdicts",
    "verify_chunks_batched",
    "PARSE_ERROR",
    "CONTEXT_OVERFLOW",
    "VERDICT_ERRORS",
]

PARSE_ERROR = "PARSE_ERROR"
CONTEXT_OVERFLOW = "CONTEXT_OVERFLOW"
# flag types that say the verifier could not judge the chunk, not that its content is bad
VERDICT_ERRORS = frozenset({PARSE_ERROR, CONTEXT_OVERFLOW})
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class VerificationRequest:
    """Everything a verifier sees for one chunk."""

    query: str
    chunk: str
    chunk_index: int
    rationales: tuple[Rationale, ...]
    accepted_evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """One verifier decision; ``accepted`` is ``relevant and not flagged``."""

    relevant: bool
    flagged: bool
    reason: str = ""
    flag_types: tuple[str, ...] = ()
    chunk_index: int = -1

    @property
    def accepted(self) -> bool:
        return self.relevant and not self.flagged

    @property
    def parse_error(self) -> bool:
        return PARSE_ERROR in self.flag_types

    @property
    def is_error(self) -> bool:
        """The verifier gave no usable judgement (unparseable answer, prompt too long): a rejection, not a flag."""
        return bool(self.flag_types) and set(self.flag_types) <= VERDICT_ERRORS

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_index": self.chunk_index,
            "accepted": self.accepted,
            "relevant": self.relevant,
            "flagged": self.flagged,
            "reason": self.reason,
            "flag_types": list(self.flag_types),
        }


@runtime_checkable
class Verifier(Protocol):
    def verify(self, request: VerificationRequest) -> Mapping[str, Any] | str: ...


VerifierLike = Union[Verifier, Callable[[VerificationRequest], Union[Mapping[str, Any], str]]]

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _first_balanced_object(text: str) -> str | None:
    """The first ``{…}`` with balanced braces outside of JSON strings."""
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for pos in range(start, len(text)):
            ch = text[pos]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : pos + 1]
        start = text.find("{", start + 1)
    return None


def _load_object(text: str) -> Mapping[str, Any] | None:
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    balanced = _first_balanced_object(text)
    if balanced:
        candidates.append(balanced)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def _failed(reason: str, chunk_index: int) -> Verdict:
    return Verdict(relevant=False, flagged=True, reason=reason, flag_types=(PARSE_ERROR,), chunk_index=chunk_index)


def parse_verdict(raw: object, *, chunk_index: int = -1) -> Verdict:
    """Turn a verifier's answer into a :class:`Verdict`, failing closed.

    Args:
        raw: a mapping, or text holding JSON (plain, in a fenced block, or the first
            balanced object in prose).
        chunk_index: the chunk this verdict is about, recorded in the verdict.

    Returns:
        The verdict. Missing or non-boolean ``relevant``/``flagged`` give a rejected
        verdict with flag type ``PARSE_ERROR``.
    """
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", errors="replace")
    obj = raw if isinstance(raw, Mapping) else _load_object(raw) if isinstance(raw, str) else None
    if obj is None:
        return _failed(f"verifier answer is not a JSON object: {str(raw)[:80]!r}", chunk_index)
    relevant, flagged = obj.get("relevant"), obj.get("flagged")
    if not isinstance(relevant, bool) or not isinstance(flagged, bool):
        return _failed(
            f"verifier answer lacks boolean 'relevant'/'flagged' (got {relevant!r}, {flagged!r})", chunk_index
        )
    reason = obj.get("reason", "")
    reason = reason[:MAX_REASON_CHARS] if isinstance(reason, str) else ""
    types = obj.get("flag_types") or ()
    if isinstance(types, str):
        types = (types,)
    flag_types = tuple(str(t)[:64] for t in types if isinstance(t, (str, int, float))) if isinstance(types, (list, tuple)) else ()
    return Verdict(relevant=relevant, flagged=flagged, reason=reason, flag_types=flag_types, chunk_index=chunk_index)


def _call(verifier: VerifierLike, request: VerificationRequest) -> object:
    if hasattr(verifier, "verify"):
        return verifier.verify(request)
    if callable(verifier):
        return verifier(request)
    raise InputError(
        f"verifier of type {type(verifier).__name__} has no .verify() and is not callable"
    )


def verify_chunks(
    verifier: VerifierLike,
    query: str,
    texts: Sequence[str],
    order: Sequence[int],
    rationales: Sequence[Rationale],
) -> list[Verdict]:
    """Judge ``texts[i]`` for each ``i`` in ``order``, passing the evidence accepted so far.

    Returns:
        One verdict per judged chunk, in judging order.
    """
    accepted: list[str] = []
    verdicts: list[Verdict] = []
    for index in order:
        request = VerificationRequest(
            query=query,
            chunk=texts[index],
            chunk_index=int(index),
            rationales=tuple(rationales),
            accepted_evidence=tuple(accepted),
        )
        verdict = parse_verdict(_call(verifier, request), chunk_index=int(index))
        verdicts.append(verdict)
        if verdict.accepted:
            accepted.append(texts[index])
    return verdicts


# -- several chunks per answer -----------------------------------------------------------


@runtime_checkable
class BatchVerifier(Protocol):
    """Judges several chunks of one query at once; the requests share query, rationales and evidence."""

    def verify_batch(self, requests: Sequence[VerificationRequest]) -> Sequence[Mapping[str, Any]] | str: ...


def _load_array(text: str) -> list[Any] | None:
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, list):
            return value
        if isinstance(value, dict) and isinstance(value.get("verdicts"), list):
            return value["verdicts"]
    return None


def _item_id(item: Mapping[str, Any]) -> int | None:
    value = item.get("id", item.get("chunk_index"))
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("[").rstrip("]").isdigit():
        return int(value.strip().lstrip("[").rstrip("]"))
    return None


def parse_batch_verdicts(raw: object, chunk_indices: Sequence[int]) -> list[Verdict]:
    """One verdict per chunk of ``chunk_indices`` from a batched answer, failing closed per chunk.

    Args:
        raw: a JSON array text (plain, fenced, or inside prose; ``{"verdicts": [...]}`` too) or
            a list of mappings, each with ``id`` (the chunk index), ``relevant`` and ``flagged``.
        chunk_indices: the chunks the answer had to judge, in order.

    Returns:
        Verdicts in ``chunk_indices`` order. A chunk with no item, an item that is not a usable
        verdict, or an id given twice, gets a ``PARSE_ERROR`` verdict; the other chunks keep theirs.
    """
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", errors="replace")
    items = list(raw) if isinstance(raw, (list, tuple)) else _load_array(raw) if isinstance(raw, str) else None
    if items is None:
        shown = str(raw)[:80]
        return [_failed(f"batched verifier answer is not a JSON array: {shown!r}", int(i)) for i in chunk_indices]
    wanted = {int(i) for i in chunk_indices}
    found: dict[int, Verdict] = {}
    repeated: set[int] = set()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        index = _item_id(item)
        if index is None or index not in wanted:
            continue
        if index in found:
            repeated.add(index)
        found[index] = parse_verdict(item, chunk_index=index)
    verdicts = []
    for index in (int(i) for i in chunk_indices):
        if index in repeated:
            verdicts.append(_failed(f"batched verifier answer judges chunk {index} more than once", index))
        elif index in found:
            verdicts.append(found[index])
        else:
            verdicts.append(_failed(f"batched verifier answer has no verdict for chunk {index}", index))
    return verdicts


def verify_chunks_batched(
    verifier: BatchVerifier,
    query: str,
    texts: Sequence[str],
    order: Sequence[int],
    rationales: Sequence[Rationale],
    *,
    batch_size: int,
) -> list[Verdict]:
    """Judge ``texts[i]`` for ``i`` in ``order`` in batches of ``batch_size`` chunks.

    Each batch sees the evidence accepted in the batches before it (chunks of one batch are
    judged together, so they do not see each other's verdicts).

    Returns:
        One verdict per judged chunk, in judging order.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    accepted: list[str] = []
    verdicts: list[Verdict] = []
    for start in range(0, len(order), batch_size):
        batch = [int(i) for i in order[start : start + batch_size]]
        requests = [
            VerificationRequest(query=query, chunk=texts[i], chunk_index=i, rationales=tuple(rationales),
                                accepted_evidence=tuple(accepted))
            for i in batch
        ]
        judged = parse_batch_verdicts(verifier.verify_batch(requests), batch)
        verdicts += judged
        accepted += [texts[v.chunk_index] for v in judged if v.accepted]
    return verdicts
