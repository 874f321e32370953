"""Rationales: short search instructions, each optionally with flag (rejection) rules.

The canonical text form is
``<rationale_N>[Label] text Flag Instructions: rule</rationale_N>``; :func:`parse_rationales`
also reads loose tags, ``Rationale N:`` headings, numbered or bulleted lists and plain lines,
because language models rarely keep a format exactly. :func:`resolve_rationales` picks a
query's rationales — given, else from a generator (any callable or chat model), else the
query itself — for the reranker facade and the pipeline alike.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..errors import ConfigError, InputError

__all__ = [
    "Rationale", "RationaleGenerator", "parse_rationales", "format_rationales", "as_rationales", "resolve_rationales",
    "with_rules", "flag_rules",
]

RationaleGenerator = Union[Callable[[str], object], Callable[[str, Sequence[str]], object], Any]
_GENERATOR_METHODS = ("generate", "complete", "invoke")


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


def with_rules(rationales: Sequence[Rationale], rules: Sequence[str]) -> list[Rationale]:
    """``rationales`` with ``rules`` (rejection rules) added to the first one's flag instructions.

    One place is enough: the verifier reads every rationale's flag instructions, and so does the
    LLM rerank (:func:`flag_rules`). A rule the first rationale already carries is not repeated.

    Example:
        >>> with_rules([Rationale("notice period")], ["drafts"])[0].flag_instructions
        'drafts'
    """
    out = list(rationales)
    if not out or not rules:
        return out
    first = out[0]
    have = [first.flag_instructions] if first.flag_instructions else []
    merged = have + [r for r in rules if r not in have]
    out[0] = Rationale(first.text, first.index, first.label, "; ".join(merged))
    return out


def flag_rules(rationales: Sequence[Rationale]) -> tuple[str, ...]:
    """Every rationale's flag instructions, once each, in order.

    Example:
        >>> flag_rules([Rationale("a", 1, None, "drafts"), Rationale("b", 2), Rationale("c", 3, None, "drafts")])
        ('drafts',)
    """
    return tuple(dict.fromkeys(r.flag_instructions for r in rationales if getattr(r, "flag_instructions", None)))


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


def _takes_documents(function: Callable[..., object]) -> bool:
    """Whether ``function`` accepts a second argument (METEORA's ``generator(query, documents)``)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: call with the query only
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in parameters) or any(p.name == "documents" for p in parameters):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def _generate(generator: RationaleGenerator, query: str, documents: Sequence[str]) -> object:
    """Call a rationale generator as METEORA does: with ``(query, documents)`` when it takes
    both, else with the query; ``.generate``/``.complete``/``.invoke`` before ``__call__``."""
    method = next((getattr(generator, name) for name in _GENERATOR_METHODS if callable(getattr(generator, name, None))), None)
    function = method if method is not None else generator if callable(generator) else None
    if function is None:
        raise ConfigError(
            f"rationale_generator of type {type(generator).__name__} is not callable and has no .generate(), "
            ".complete() or .invoke()"
        )
    answer = function(query, list(documents)) if _takes_documents(function) else function(query)
    content = getattr(answer, "content", None)  # a chat message object
    return content if isinstance(content, str) and not isinstance(answer, (str, Sequence)) else answer


def resolve_rationales(
    query: str,
    rationales: object | None,
    generator: RationaleGenerator | None,
    *,
    fallback_to_query: bool,
    documents: Sequence[str] = (),
) -> tuple[list[Rationale], str]:
    """Pick the rationales for a query: given → generated → the query itself.

    A generator that takes two arguments is called with ``(query, documents)``.

    Returns:
        The rationales and their source: ``"given"``, ``"generated"`` or ``"query-fallback"``.

    Raises:
        InputError: nothing usable and the query fallback is off (or the query is empty).
    """
    if rationales is not None:
        given = as_rationales(rationales)
        if given:
            return given, "given"
    if generator is not None:
        generated = as_rationales(_generate(generator, query, documents))
        if generated:
            return generated, "generated"
    if fallback_to_query and isinstance(query, str) and query.strip():
        return [Rationale(text=" ".join(query.split()), index=1)], "query-fallback"
    raise InputError(
        "no rationale: give rationales, a rationale generator, or a non-empty query with the query fallback on"
    )
