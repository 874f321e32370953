"""Few-shot examples for the rationale generator, in every form METEORA documents.

A sample shot is one of:

* ``{"query": …, "response": "<rationale_1>[Label] … Flag Instructions: …</rationale_1>"}`` —
  METEORA's form: the answer as tagged text (``question``/``prompt`` are read as the query,
  ``rationales``/``completion``/``answer`` as the answer);
* ``{"query": …, "rationales": [ "[Label] … Flag Instructions: …", … ]}`` — a list of
  rationale strings or ``{"text"|"rationale": …, "label": …, "flag_instructions": …}`` objects;
* a plain string — ``"Query: …\\n<rationale_1>…</rationale_1>"`` is read as a query and its
  rationales; any other text is shown to the model verbatim as an example.

Shot files (:func:`load_sample_shots`) are a JSON list (or ``{"shots"|"sample_shots"|"examples": […]}``),
JSON Lines, or plain text: one shot per ``Query:`` block, or per blank-line-separated block.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ..errors import ConfigError, InputError
from .rationales import Rationale, as_rationales, parse_rationales

__all__ = ["SampleShot", "Shot", "check_shots", "load_sample_shots"]

SampleShot = Union[str, Mapping[str, Any]]
QUERY_KEYS = ("query", "question", "prompt")
ANSWER_KEYS = ("response", "rationales", "completion", "answer")
LIST_KEYS = ("shots", "sample_shots", "examples")
_QUERY_LINE = re.compile(r"^[ \t]*(?:query|question)[ \t]*:[ \t]*(.*)$", re.I | re.M)
_ANSWER_HEADING = re.compile(r"^\s*(?:rationales?|response|answer)\s*:\s*", re.I)


@dataclass(frozen=True)
class Shot:
    """A checked shot: a query with its rationales, or (``query`` None) an example shown verbatim."""

    query: str | None
    rationales: tuple[Rationale, ...] = ()
    text: str = ""


def _answer_rationales(value: object, where: str) -> list[Rationale]:
    if isinstance(value, str):
        return parse_rationales(value)
    try:
        return as_rationales(value)
    except InputError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _text_shot(text: str, position: int) -> Shot:
    match = _QUERY_LINE.search(text)
    if match and match.group(1).strip():
        answer = _ANSWER_HEADING.sub("", text[match.end() :], count=1)
        rationales = parse_rationales(answer)
        if not rationales:
            raise ConfigError(f"sample shot {position} has a query but no rationale after it; add the tagged rationales")
        return Shot(" ".join(match.group(1).split()), tuple(rationales))
    if not text.strip():
        raise ConfigError(f"sample shot {position} is an empty string")
    return Shot(None, (), text.strip())


def _mapping_shot(shot: Mapping[str, Any], position: int) -> Shot:
    query = next((shot[k] for k in QUERY_KEYS if isinstance(shot.get(k), str) and shot[k].strip()), None)
    if query is None:
        raise ConfigError(f"sample shot {position} needs a non-empty string 'query' (or 'question'/'prompt')")
    key = next((k for k in ANSWER_KEYS if shot.get(k) not in (None, "", [])), None)
    rationales = _answer_rationales(shot[key], f"sample shot {position}") if key else []
    if not rationales:
        raise ConfigError(
            f"sample shot {position} needs at least one rationale: give 'response' (tagged text) or 'rationales'"
        )
    return Shot(" ".join(query.split()), tuple(rationales))


def check_shots(shots: object) -> list[Shot]:
    """Check and normalise sample shots (see the module doc).

    Raises:
        ConfigError: no shots, or a shot without a query or without rationales.
    """
    if not isinstance(shots, Sequence) or isinstance(shots, (str, bytes)) or not shots:
        raise ConfigError(
            "sample_shots is required: give a non-empty list of {'query': …, 'response': …} or "
            "{'query': …, 'rationales': …} (see load_sample_shots())"
        )
    checked = []
    for position, shot in enumerate(shots):
        if isinstance(shot, str):
            checked.append(_text_shot(shot, position))
        elif isinstance(shot, Mapping):
            checked.append(_mapping_shot(shot, position))
        else:
            raise ConfigError(f"sample shot {position} is a {type(shot).__name__}; give a mapping or a string")
    return checked


def _split_text(text: str) -> list[str]:
    """One shot per ``Query:`` block (a header before the first is kept as an example), else per paragraph."""
    starts = [m.start() for m in _QUERY_LINE.finditer(text)]
    if starts:
        bounds = [0, *starts] if text[: starts[0]].strip() else starts
        return [text[a:b].strip() for a, b in zip(bounds, [*bounds[1:], len(text)]) if text[a:b].strip()]
    return [block.strip() for block in re.split(r"\n[ \t]*\n", text) if block.strip()]


def _shot_list(data: object, where: str) -> list[Any]:
    if isinstance(data, dict):
        key = next((k for k in LIST_KEYS if isinstance(data.get(k), list)), None)
        if key is None:
            raise InputError(f"{where} must hold a list of shots or {{\"shots\": [...]}}")
        return data[key]
    if not isinstance(data, list):
        raise InputError(f"{where} must hold a list of shots or {{\"shots\": [...]}}")
    return data


def load_sample_shots(path: str | os.PathLike[str] | None = None, *, shipped: str = "data/rationale_shots.json") -> list[Any]:
    """Read sample shots from a file; the shipped defaults when ``path`` is None.

    ``.json``: a list or ``{"shots"|"sample_shots"|"examples": [...]}``; ``.jsonl``: one shot per
    line; any other file: JSON when it parses as JSON, else text shots (see the module doc).

    Args:
        path: a shots file, or None for the shipped file ``shipped`` (a path inside the package).

    Raises:
        InputError: the file is missing, malformed or holds no shots.
    """
    from ..fileio import read_json_file, read_json_or_jsonl, read_json_source, read_text_file

    if path is None:
        data, where = read_json_source(None, shipped=shipped, what="sample shots")
        return _shot_list(data, where)
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        shots = _shot_list(read_json_file(path), str(path))
    elif suffix in (".jsonl", ".ndjson"):
        shots = _shot_list(read_json_or_jsonl(path), str(path))
    else:
        text = read_text_file(path)
        try:
            shots = _shot_list(json.loads(text), str(path)) if text.lstrip()[:1] in ("[", "{") else _split_text(text)
        except (json.JSONDecodeError, RecursionError):
            shots = _split_text(text)  # a text file that starts with "[Label]"
    if not shots:
        raise InputError(f"{path} holds no sample shots")
    return shots
