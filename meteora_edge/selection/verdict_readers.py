"""Verdict parsing: a verifier's answer (JSON, fenced JSON, JSON in prose, METEORA-style
prose, a mapping or a message object) read into :class:`~.verifier_protocol.Verdict` objects.

:func:`parse_verdict` reads one chunk's answer, failing closed unless told otherwise;
:func:`parse_batch_verdicts` reads a batched answer chunk by chunk, so one unusable item
rejects its own chunk only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .verifier_protocol import MAX_RAW_CHARS, MAX_REASON_CHARS, PARSE_ERROR, Verdict

__all__ = ["parse_verdict", "parse_batch_verdicts"]

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
