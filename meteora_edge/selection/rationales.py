"""Rationales: short search instructions, each optionally with flag (rejection) rules.

The canonical text form is
``<rationale_N>[Label] text Flag Instructions: rule</rationale_N>``; :func:`parse_rationales`
also reads loose tags, ``Rationale N:`` headings, numbered or bulleted lists and plain lines,
because language models rarely keep a format exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

__all__ = ["Rationale", "parse_rationales", "format_rationales", "as_rationales"]


@dataclass(frozen=True)
class Rationale:
    """One search instruction.

    Args:
        text: what evidence to look for.
        index: 1-based position in the generated list.
        label: an optional short category, written as ``[Label]``.
        flag_instructions: an optional rule saying when a matching chunk must be rejected.
    """

    text: str
    index: int = 1
    label: str | None = None
    flag_instructions: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "label": self.label,
            "text": self.text,
            "flag_instructions": self.flag_instructions,
        }

    def to_tagged(self) -> str:
        """The canonical ``<rationale_N>…</rationale_N>`` form."""
        label = f"[{self.label}] " if self.label else ""
        flag = f" Flag Instructions: {self.flag_instructions}" if self.flag_instructions else ""
        return f"<rationale_{self.index}>{label}{self.text}{flag}</rationale_{self.index}>"


_STRICT = re.compile(r"<rationale_(\d+)>(.*?)</rationale_\1>", re.S | re.I)
_LOOSE_OPEN = re.compile(r"<\s*rationale(?:[\s_-]*\d+)?\s*>", re.I)
_LOOSE_CLOSE = re.compile(r"<\s*/\s*rationale(?:[\s_-]*\d+)?\s*>", re.I)
_HEADING = re.compile(r"^\s*(?:\*\*)?rationale\s*#?\s*\d+\s*(?:\*\*)?\s*[:.)-]\s*(?:\*\*)?", re.I | re.M)
_LIST_ITEM = re.compile(r"^\s*(?:\d+\s*[.)]|[-*•])\s+", re.M)
_LABEL = re.compile(r"^\s*\[([^\]\n]{1,80})\]\s*")
_FLAG = re.compile(r"\s*\bflag[\s_-]*instructions?\s*:\s*", re.I)


def _split_piece(piece: str) -> tuple[str, str | None, str | None]:
    """Split one rationale body into (text, label, flag instructions)."""
    body = " ".join(piece.split())
    label = None
    match = _LABEL.match(body)
    if match:
        label = match.group(1).strip() or None
        body = body[match.end() :]
    parts = _FLAG.split(body, maxsplit=1)
    text = parts[0].strip()
    flag = parts[1].strip() if len(parts) > 1 and parts[1].strip() else None
    return text, label, flag


def _pieces(text: str) -> list[str]:
    strict = [m.group(2) for m in _STRICT.finditer(text)]
    if strict:
        return strict
    if _LOOSE_OPEN.search(text):
        # text before the first tag and between a closing and the next opening tag is commentary
        return [_LOOSE_CLOSE.split(segment)[0] for segment in _LOOSE_OPEN.split(text)[1:]]
    if _LOOSE_CLOSE.search(text):
        return _LOOSE_CLOSE.split(text)
    if _HEADING.search(text):
        return _HEADING.split(text)[1:]
    if _LIST_ITEM.search(text):
        return _LIST_ITEM.split(text)[1:]  # text before the first item is a preamble
    return text.splitlines()


def parse_rationales(text: str) -> list[Rationale]:
    """Parse rationales from model output or a user's text, tolerantly.

    Tried in order: strict ``<rationale_N>`` tags, loose ``<rationale>`` tags,
    ``Rationale N:`` headings, numbered or bulleted lists, and finally one rationale per
    non-empty line. Within each piece a leading ``[Label]`` and a trailing
    ``Flag Instructions: …`` are split off.

    Args:
        text: the text to parse.

    Returns:
        The rationales, numbered 1..N in order; empty when nothing usable is found.

    Raises:
        InputError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise InputError(f"rationale text must be a string, got {type(text).__name__}")
    rationales: list[Rationale] = []
    for piece in _pieces(text):
        body, label, flag = _split_piece(piece)
        if body:
            rationales.append(Rationale(text=body, index=len(rationales) + 1, label=label, flag_instructions=flag))
    return rationales


def format_rationales(rationales: Sequence[Rationale]) -> str:
    """Write rationales in the canonical tagged form, one per line."""
    return "\n".join(r.to_tagged() for r in rationales)


def as_rationales(value: object) -> list[Rationale]:
    """Normalise what a caller or a generator gave into a list of :class:`Rationale`.

    Accepts a text (parsed with :func:`parse_rationales`), or a sequence of strings,
    :class:`Rationale` objects or mappings with ``text`` (or METEORA's ``rationale``; optional
    ``label``, ``flag_instructions``). Strings in a sequence are taken whole, one rationale each,
    with their ``[Label]`` and ``Flag Instructions:`` split off.

    Raises:
        InputError: an item has an unsupported type or an empty text.
    """
    if isinstance(value, str):
        return parse_rationales(value)
    if not isinstance(value, Sequence):
        raise InputError(
            f"rationales must be a text or a list of texts, got {type(value).__name__}"
        )
    out: list[Rationale] = []
    for position, item in enumerate(value):
        if isinstance(item, Rationale):
            text, label, flag = item.text, item.label, item.flag_instructions
        elif isinstance(item, str):
            text, label, flag = _split_piece(item)
        elif isinstance(item, dict) and isinstance(item.get("text", item.get("rationale")), str):
            text = " ".join(item.get("text", item.get("rationale")).split())
            label = item.get("label") if isinstance(item.get("label"), str) else None
            flag = item.get("flag_instructions") if isinstance(item.get("flag_instructions"), str) else None
        else:
            raise InputError(
                f"rationale at position {position} is a {type(item).__name__}; "
                "give a string or an object with a string 'text'"
            )
        if not text.strip():
            raise InputError(f"rationale at position {position} has an empty text")
        out.append(Rationale(text=text, index=len(out) + 1, label=label or None, flag_instructions=flag or None))
    return out
