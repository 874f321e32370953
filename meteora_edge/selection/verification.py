"""The verifier protocol: judge each chunk, accept only when relevant and not flagged.

A verifier is anything METEORA's verifier accepts, plus this package's own protocol:

* an object with ``.verify(request)`` (e.g. :class:`~meteora_edge.selection.llm_verifier.LlamaVerifier`);
* a callable ``f(request)``;
* an object with ``.generate``, ``.complete`` or ``.invoke`` (a text model).

The :class:`VerificationRequest` it receives *is the prompt text* (a ``str``) and carries the
parts as attributes (``query``, ``chunk``, ``chunk_index``, ``rationales``,
``accepted_evidence``), so a callable that sends its argument to a model and one that reads
``request.chunk`` both work. The answer may be a mapping, JSON text, a message object with
``.content`` or a :class:`Verdict`.

Reading is fail-closed by default: an answer without boolean ``relevant`` and ``flagged`` is
rejected with flag type ``PARSE_ERROR``. :class:`MeteoraVerifier` with ``fail_closed=False``
reads leniently as METEORA does (``"yes"``/``1``/``relevant: yes`` prose) and accepts an
answer it cannot read. Chunks are judged one at a time, best first, each with the evidence
accepted so far. Errors raised by the model itself propagate to the caller.

A *batch* verifier (``.verify_batch(requests)``, see :class:`BatchVerifier`) judges several
chunks in one answer: a JSON array (or a list of mappings) with one verdict per chunk,
keyed by ``id`` = the chunk index. :func:`parse_batch_verdicts` reads it chunk by chunk: a
chunk the answer leaves out, or whose verdict is unusable, gets a ``PARSE_ERROR`` verdict of
its own while the others stand. :func:`verify_chunks_batched` feeds the batches in judging
order, each with the evidence accepted in the batches before it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, Union, runtime_checkable

from ..errors import ConfigError, InputError
from .rationales import Rationale, format_rationales

__all__ = [
    "Verdict",
    "VerificationRequest",
    "Verifier",
    "VerifierLike",
    "MeteoraVerifier",
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
MAX_RAW_CHARS = 2000
_MODEL_METHODS = ("generate", "complete", "invoke")

_PROMPT = """You verify one retrieved passage before it reaches an answer model.

Query: {query}

Rationales (the evidence to look for; a passage that matches a rationale's Flag Instructions must be flagged):
{rationales}

Evidence accepted so far:
{evidence}

Passage {index}:
{chunk}

Answer with one JSON object and nothing else:
{{"relevant": true or false, "flagged": true or false, "reason": "one short sentence", "flag_types": ["..."] or [], "confidence": a number from 0 to 1}}"""


def render_verifier_prompt(
    query: str, chunk: str, chunk_index: int, rationales: Sequence[Rationale], accepted_evidence: Sequence[str]
) -> str:
    """The plain-text verifier prompt for one chunk (what a text-model verifier receives)."""
    evidence = "\n".join(f"[{n}] {' '.join(e.split())}" for n, e in enumerate(accepted_evidence, start=1))
    return _PROMPT.format(
        query=" ".join(query.split()),
        rationales=format_rationales(rationales) or "(none)",
        evidence=evidence or "(none)",
        index=chunk_index,
        chunk=chunk.strip(),
    )


class VerificationRequest(str):
    """Everything a verifier sees for one chunk; as a string, the verifier prompt built from it.

    Args:
        query: the question.
        chunk: the passage to judge.
        chunk_index: its position among the candidates.
        rationales: the rationales with their flag instructions.
        accepted_evidence: the passages accepted so far, in order.
    """

    query: str
    chunk: str
    chunk_index: int
    rationales: tuple[Rationale, ...]
    accepted_evidence: tuple[str, ...]

    def __new__(
        cls,
        query: str,
        chunk: str,
        chunk_index: int,
        rationales: Sequence[Rationale],
        accepted_evidence: Sequence[str] = (),
    ) -> VerificationRequest:
        rationales, accepted_evidence = tuple(rationales), tuple(accepted_evidence)
        self = super().__new__(cls, render_verifier_prompt(query, chunk, chunk_index, rationales, accepted_evidence))
        self.__dict__.update(query=query, chunk=chunk, chunk_index=chunk_index, rationales=rationales,
                             accepted_evidence=accepted_evidence)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("VerificationRequest is immutable")

    @property
    def prompt(self) -> str:
        """The prompt as a plain ``str``."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (VerificationRequest, (self.query, self.chunk, self.chunk_index, self.rationales, self.accepted_evidence))

    def __repr__(self) -> str:
        return (f"VerificationRequest(query={self.query!r}, chunk_index={self.chunk_index}, "
                f"rationales={len(self.rationales)}, accepted_evidence={len(self.accepted_evidence)})")


@dataclass(frozen=True)
class Verdict:
    """One verifier decision; ``accepted`` is ``relevant and not flagged``.

    ``confidence`` is the verifier's own (when it gave one); ``raw`` is the model's answer text
    (cut to 2000 characters; ``None`` when the verifier returned a mapping).
    """

    relevant: bool
    flagged: bool
    reason: str = ""
    flag_types: tuple[str, ...] = ()
    chunk_index: int = -1
    confidence: float | None = None
    raw: str | None = None

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
            "confidence": self.confidence,
            "raw": self.raw,
        }


@runtime_checkable
class Verifier(Protocol):
    def verify(self, request: VerificationRequest) -> Mapping[str, Any] | str | Verdict: ...


VerifierLike = Union[Verifier, Callable[[VerificationRequest], object], Any]

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


_TRUE = {"true", "yes", "y", "1", "accepted", "accept"}
_FALSE = {"false", "no", "n", "0", "rejected", "reject"}
_PROSE_FIELD = r"\b{field}\b[\s\"'*]*[:=-]\s*[\"'*]*\s*(true|false|yes|no|1|0)\b"
_PROSE_REASON = re.compile(r"\breason\b[\s\"'*]*[:=-]\s*(.+)", re.I)


def _failed(reason: str, chunk_index: int, raw: str | None) -> Verdict:
    return Verdict(relevant=False, flagged=True, reason=reason, flag_types=(PARSE_ERROR,), chunk_index=chunk_index,
                   raw=raw)


def _answer_text(raw: object) -> str | None:
    """The text of an answer: a string, bytes, or a message object with ``.content``/``.text``."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw).decode("utf-8", errors="replace")
    for attr in ("content", "text", "output_text"):
        value = getattr(raw, attr, None)
        if isinstance(value, str):
            return value
    return None


def _lenient_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and math.isfinite(value):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None
    return None


def _prose_fields(text: str) -> dict[str, Any] | None:
    """``relevant: yes`` / ``flagged = false`` / ``reason: …`` written as prose (lenient mode)."""
    found: dict[str, Any] = {}
    for field in ("relevant", "flagged"):
        match = re.search(_PROSE_FIELD.format(field=field), text, re.I)
        if match:
            found[field] = match.group(1).lower() in _TRUE
    if not found:
        return None
    reason = _PROSE_REASON.search(text)
    found["reason"] = reason.group(1).strip() if reason else ""
    return found


def _confidence(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def parse_verdict(raw: object, *, chunk_index: int = -1, fail_closed: bool = True) -> Verdict:
    """Turn a verifier's answer into a :class:`Verdict`.

    Args:
        raw: a :class:`Verdict`, a mapping, text holding JSON (plain, in a fenced block, or the
            first balanced object in prose), bytes, or a message object with ``.content``.
        chunk_index: the chunk this verdict is about, recorded in the verdict.
        fail_closed: ``True`` (the default): ``relevant`` and ``flagged`` must be JSON booleans,
            anything else is rejected with flag type ``PARSE_ERROR``. ``False`` (METEORA's
            lenient mode): ``"true"``/``"yes"``/``1``-style values and prose such as
            ``relevant: yes`` are read, a missing ``flagged`` is false, a missing ``relevant``
            is ``not flagged``, and an answer that cannot be read at all is *accepted*.

    Returns:
        The verdict, with the verifier's ``confidence`` (when given) and the raw answer text.
    """
    if isinstance(raw, Verdict):
        return raw if raw.chunk_index == chunk_index else replace(raw, chunk_index=chunk_index)
    text = None if isinstance(raw, Mapping) else _answer_text(raw)
    kept = None if text is None else text[:MAX_RAW_CHARS]
    obj = raw if isinstance(raw, Mapping) else _load_object(text) if text is not None else None
    if obj is None and not fail_closed and text is not None:
        obj = _prose_fields(text)
    if obj is None:
        shown = repr(text[:80]) if text is not None else f"a {type(raw).__name__}"
        if fail_closed:
            return _failed(f"verifier answer is not a JSON object: {shown}", chunk_index, kept)
        return Verdict(relevant=True, flagged=False, chunk_index=chunk_index, raw=kept,
                       reason=f"could not read the verifier answer ({shown}); accepted because fail_closed=False")
    relevant, flagged = obj.get("relevant"), obj.get("flagged")
    if fail_closed and (not isinstance(relevant, bool) or not isinstance(flagged, bool)):
        return _failed(
            f"verifier answer lacks boolean 'relevant'/'flagged' (got {relevant!r}, {flagged!r})", chunk_index, kept
        )
    if not fail_closed:
        flagged = bool(_lenient_bool(flagged))
        read = _lenient_bool(relevant)
        relevant = (not flagged) if read is None else read
    reason = obj.get("reason") or ("" if fail_closed else obj.get("explanation"))
    reason = reason[:MAX_REASON_CHARS] if isinstance(reason, str) else ""
    types = obj.get("flag_types") or ()
    if isinstance(types, str):
        types = (types,)
    flag_types = tuple(str(t)[:64] for t in types if isinstance(t, (str, int, float))) if isinstance(types, (list, tuple)) else ()
    return Verdict(relevant=relevant, flagged=flagged, reason=reason, flag_types=flag_types, chunk_index=chunk_index,
                   confidence=_confidence(obj.get("confidence")), raw=kept)


def call_verifier(verifier: VerifierLike, request: VerificationRequest) -> object:
    """Ask ``verifier`` about one chunk: ``.verify(request)``, ``verifier(request)``, or a text
    model's ``.generate``/``.complete``/``.invoke`` with the request (which is the prompt text).

    Raises:
        ConfigError: ``verifier`` is none of these.
    """
    if hasattr(verifier, "verify"):
        return verifier.verify(request)
    if callable(verifier):
        return verifier(request)
    for name in _MODEL_METHODS:
        method = getattr(verifier, name, None)
        if callable(method):
            return method(request)
    raise ConfigError(
        f"verifier of type {type(verifier).__name__} has no .verify(), .generate(), .complete() or .invoke() "
        "and is not callable"
    )


class MeteoraVerifier:
    """A verifier around any text model, read strictly or (``fail_closed=False``) as METEORA reads.

    Args:
        model: a callable taking the prompt text, an object with ``.generate``, ``.complete`` or
            ``.invoke`` returning text or a message with ``.content``, or any verifier this
            module accepts.
        fail_closed: reject answers that are not clean JSON booleans (default); ``False`` reads
            leniently and accepts unreadable answers (see :func:`parse_verdict`).

    Example:
        >>> v = MeteoraVerifier(lambda prompt: "relevant: yes, flagged: no", fail_closed=False)
        >>> v.verify(VerificationRequest("q?", "a passage", 0, ())).accepted
        True
    """

    def __init__(self, model: VerifierLike, *, fail_closed: bool = True) -> None:
        if not (hasattr(model, "verify") or callable(model) or any(callable(getattr(model, m, None)) for m in _MODEL_METHODS)):
            raise ConfigError(
                f"verifier model of type {type(model).__name__} is not callable and has no .generate(), "
                ".complete() or .invoke()"
            )
        if not isinstance(fail_closed, bool):
            raise ConfigError(f"fail_closed must be True or False, got {fail_closed!r}")
        self.model = model
        self.fail_closed = fail_closed

    def verify(self, request: VerificationRequest) -> Verdict:
        """Judge one chunk; model errors propagate."""
        return parse_verdict(call_verifier(self.model, request), chunk_index=request.chunk_index,
                             fail_closed=self.fail_closed)

    def __repr__(self) -> str:
        return f"MeteoraVerifier(model={type(self.model).__name__}, fail_closed={self.fail_closed})"


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
        request = VerificationRequest(query, texts[index], int(index), tuple(rationales), tuple(accepted))
        verdict = parse_verdict(call_verifier(verifier, request), chunk_index=int(index))
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
    if isinstance(value, str):
        digits = value.strip().lstrip("[").rstrip("]")
        if digits.isdecimal():  # not isdigit: int() refuses superscripts such as "³"
            return int(digits)
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
        kept = raw[:MAX_RAW_CHARS] if isinstance(raw, str) else None
        return [_failed(f"batched verifier answer is not a JSON array: {shown!r}", int(i), kept) for i in chunk_indices]
    wanted = {int(i) for i in chunk_indices}
    found: dict[int, Verdict] = {}
    repeated: set[int] = set()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        index = _item_id(item)
        if index not in wanted:  # no id (None) is never wanted
            continue
        if index in found:
            repeated.add(index)
        found[index] = parse_verdict(item, chunk_index=index)
    verdicts = []
    for index in (int(i) for i in chunk_indices):
        if index in repeated:
            verdicts.append(_failed(f"batched verifier answer judges chunk {index} more than once", index, None))
        elif index in found:
            verdicts.append(found[index])
        else:
            verdicts.append(_failed(f"batched verifier answer has no verdict for chunk {index}", index, None))
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
