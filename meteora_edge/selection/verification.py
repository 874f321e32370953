"""The verifier protocol: judge each chunk, accept only when relevant and not flagged.

A verifier is a callable ``f(request) -> mapping | JSON text`` or an object with
``.verify(request)``. Its answer must carry boolean ``relevant`` and ``flagged``; anything
else is rejected with flag type ``PARSE_ERROR`` (fail closed). Chunks are judged one at a
time, best first, each with the evidence accepted so far. Errors raised by the model
itself propagate to the caller.
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
