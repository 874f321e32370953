"""Evaluation data sets: questions with their own candidates, in two layouts read alike.

* the **HotpotQA layout** (Hugging Face ``datasets``: ``question``, ``answer``, ``context``,
  ``supporting_facts``), one JSON list — :func:`load_hotpot`;
* **per-query JSONL**, one object a line — :func:`load_jsonl`::

      {"query": "Who may terminate?", "candidates": ["Either party may terminate.", "Fees are monthly."], "gold": [0]}
      {"id": "q2", "query": "When are fees due?", "candidates": [{"id": "c1", "text": "Fees are due monthly."}, {"id": "c2", "text": "Notice is 30 days."}], "gold": ["c1"], "group": "fees"}
      {"query": "What law governs?", "candidates": ["New York law governs.", "Fees are monthly."], "gold": [0], "answer": "New York"}

  ``candidates`` are strings or ``{id, text, metadata}`` objects; a candidate's id is its
  ``id``, else its 0-based position, and ``gold`` lists candidate ids. ``id``, ``answer`` and
  ``group`` (the row of ``--by group``) are optional. A candidate whose text is empty (HotpotQA
  contexts hold empty sentences) is left out of its question and counted in
  :attr:`EvalQuestion.empty_skipped`; the question runs with the rest.

:func:`load_questions` tells the two apart by their content. Corpus-level data (the BEIR
layout) is read by :mod:`meteora_edge.evaluation.beir`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, InputError
from ..fileio import parse_json, read_json_file, read_text_file

__all__ = ["EvalQuestion", "load_hotpot", "load_jsonl", "load_questions", "data_layout"]


@dataclass(frozen=True)
class EvalQuestion:
    """One question with its own candidates: gold are candidate positions, group a row of ``--by group``."""

    qid: str
    question: str
    answer: str
    candidates: list[str]
    gold: frozenset[int]
    group: str | None = None
    #: where the question was read (``FILE line N``) and the positions of the empty candidates left out
    where: str = ""
    empty_skipped: tuple[int, ...] = ()


def data_layout(path: str) -> str:
    """Which layout ``path`` holds: ``beir`` (a folder), ``hotpotqa`` (a JSON list) or ``jsonl``.

    A file whose whole text is one JSON list, or an object with a ``data`` list, is the
    HotpotQA layout; any other file is read as per-query JSONL.

    Raises:
        InputError: the path does not exist.
    """
    if os.path.isdir(path):
        return "beir"
    if not os.path.exists(path):
        raise InputError(f"{path} does not exist; give a HotpotQA JSON file, a per-query JSONL file or a BEIR folder")
    return _file_layout(read_text_file(path))[0]


def _file_layout(text: str) -> tuple[str, Any]:
    start = text.lstrip()[:1]
    if start == "[":
        return "hotpotqa", None
    if start == "{":
        first = text.lstrip().split("\n", 1)[0]
        try:
            head = parse_json(first, "the first line")
        except InputError:
            head = None
        if not (isinstance(head, dict) and ("query" in head or "candidates" in head)):
            try:
                whole = parse_json(text, "the file")
            except InputError:
                return "jsonl", None
            if isinstance(whole, dict) and "data" in whole:
                return "hotpotqa", whole
    return "jsonl", None


def load_questions(path: str, *, level: str | None = None, limit: int | None = None) -> list[EvalQuestion]:
    """Read a HotpotQA-layout or per-query JSONL file, whichever it holds.

    Args:
        path: the file.
        level: ``sentence`` or ``paragraph`` candidates (HotpotQA layout only; default sentence).
        limit: only the first ``limit`` questions.

    Raises:
        InputError: the file is unreadable or malformed (naming the file and the line or question).
        ConfigError: ``level`` given for a per-query JSONL file.
    """
    text = read_text_file(path)
    layout, parsed = _file_layout(text)
    if layout == "hotpotqa":
        data = parsed if parsed is not None else parse_json(text, path)
        return _hotpot_items(data, path, level=level or "sentence", limit=limit)
    if level is not None:
        raise ConfigError(f"level applies to the HotpotQA layout only; {path} is per-query JSONL, whose candidates are given")
    return _jsonl_items(text, path, limit=limit)


def load_jsonl(path: str, *, limit: int | None = None) -> list[EvalQuestion]:
    """Read a per-query JSONL file (see the module doc).

    Raises:
        InputError: a line that is not a JSON object, an empty query, no candidates, a
            candidate without a text string, duplicate candidate or question ids, no gold, or a gold
            id outside the candidates — each naming the file and line. (An empty candidate is
            left out, see the module doc.)
    """
    return _jsonl_items(read_text_file(path), path, limit=limit)


def _jsonl_items(text: str, path: str, *, limit: int | None) -> list[EvalQuestion]:
    questions: list[EvalQuestion] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and len(questions) >= limit:
            break
        where = f"{path} line {number}"
        question = _jsonl_question(parse_json(line, where), where, default_id=str(len(questions)))
        if question.qid in first_line:
            raise InputError(f"{where}: duplicate id {question.qid!r} (first on line {first_line[question.qid]})")
        first_line[question.qid] = number
        questions.append(question)
    if not questions:
        raise InputError(f"{path} holds no questions; give one JSON object a line")
    return questions


_JSONL_KEYS = {"id", "query", "candidates", "gold", "answer", "group"}


def _jsonl_question(item: Any, where: str, *, default_id: str) -> EvalQuestion:
    if not isinstance(item, dict):
        raise InputError(f"{where}: must be a JSON object with 'query', 'candidates' and 'gold', not a {type(item).__name__}")
    unknown = sorted(set(item) - _JSONL_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {unknown}; known: {sorted(_JSONL_KEYS)}")
    for key in ("query", "candidates", "gold"):
        if key not in item:
            raise InputError(f"{where}: missing key {key!r}")
    query = item["query"]
    if not isinstance(query, str) or not query.strip():
        raise InputError(f"{where}: 'query' must be a non-empty string")
    raw = item["candidates"]
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: 'candidates' must be a non-empty list of strings or {{id, text}} objects")
    texts: list[str] = []
    first_at: dict[object, int] = {}  # id → position in the line
    kept_at: dict[object, int | None] = {}  # id → position among the kept candidates (None: empty, left out)
    empty: list[int] = []
    for position, candidate in enumerate(raw):
        cid, body = _candidate(candidate, position, where)
        key = _id_key(cid)
        if key in first_at:
            raise InputError(f"{where}: candidates {first_at[key]} and {position} share the id {cid!r}")
        first_at[key] = position
        if body.strip():
            kept_at[key] = len(texts)
            texts.append(body)
        else:
            kept_at[key] = None
            empty.append(position)
    if not texts:
        raise InputError(f"{where}: every candidate is empty; give at least one with text")
    gold_ids = item["gold"]
    if not isinstance(gold_ids, list) or not gold_ids:
        raise InputError(f"{where}: 'gold' must be a non-empty list of candidate ids (or positions)")
    gold = set()
    for gid in gold_ids:
        key = _id_key(gid) if isinstance(gid, (str, int)) and not isinstance(gid, bool) else None
        if key not in kept_at:
            raise InputError(f"{where}: gold {gid!r} is not among the candidates' ids "
                             f"({_id_range(raw)})")
        index = kept_at[key]
        if index is not None:
            gold.add(index)
    if not gold:
        raise InputError(f"{where}: every gold candidate is empty; give gold candidates with text")
    qid = item.get("id", default_id)
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise InputError(f"{where}: 'id' must be a string or an integer")
    answer, group = item.get("answer", ""), item.get("group")
    if not isinstance(answer, str):
        raise InputError(f"{where}: 'answer' must be a string")
    if group is not None and (not isinstance(group, (str, int)) or isinstance(group, bool)):
        raise InputError(f"{where}: 'group' must be a string")
    return EvalQuestion(str(qid), query, answer, texts, frozenset(gold), None if group is None else str(group),
                        where=where, empty_skipped=tuple(empty))


def _candidate(candidate: Any, position: int, where: str) -> tuple[object, str]:
    if isinstance(candidate, str):
        cid: object = position
        body = candidate
    elif isinstance(candidate, dict):
        extra = sorted(set(candidate) - {"id", "text", "metadata"})
        if extra:
            raise InputError(f"{where}: candidate {position} has unknown key(s) {extra}; known: id, text, metadata")
        cid, body = candidate.get("id", position), candidate.get("text")
        if not isinstance(cid, (str, int)) or isinstance(cid, bool):
            raise InputError(f"{where}: candidate {position}'s 'id' must be a string or an integer")
        if "metadata" in candidate and not isinstance(candidate["metadata"], dict):
            raise InputError(f"{where}: candidate {position}'s 'metadata' must be an object")
    else:
        raise InputError(f"{where}: candidate {position} must be a string or an {{id, text}} object")
    if not isinstance(body, str):
        raise InputError(f"{where}: candidate {position} has no text")
    return cid, body


def _id_key(cid: object) -> tuple[str, object]:
    return (type(cid).__name__, cid)


def _id_range(raw: list[Any]) -> str:
    if all(isinstance(c, str) for c in raw):
        return f"positions 0 to {len(raw) - 1}"
    ids = [c.get("id", i) if isinstance(c, dict) else i for i, c in enumerate(raw)]
    shown = ", ".join(repr(i) for i in ids[:5])
    return shown + (", ..." if len(ids) > 5 else "")


def _fail(position: int, item: object, problem: str) -> InputError:
    question = item.get("question") if isinstance(item, dict) else None
    label = f"question {position}" + (f" ({str(question)[:60]!r})" if isinstance(question, str) else "")
    return InputError(f"{label}: {problem}")


def load_hotpot(path: str, *, level: str = "sentence", limit: int | None = None) -> list[EvalQuestion]:
    """Read HotpotQA-format questions (Hugging Face ``datasets`` layout) as evaluation items.

    Each item's ``type`` (HotpotQA's bridge | comparison) becomes its group.

    Raises:
        InputError: the file is unreadable, or a question lacks keys, has mismatched lists,
            or points its gold evidence outside its own context (naming the file and question).
    """
    return _hotpot_items(read_json_file(path), path, level=level, limit=limit)


def _hotpot_items(data: Any, path: str, *, level: str, limit: int | None) -> list[EvalQuestion]:
    if level not in ("sentence", "paragraph"):
        raise ConfigError(f"level must be 'sentence' or 'paragraph', got {level!r}")
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list) or not data:
        raise InputError(f"{path} must hold a non-empty list of questions")
    if limit is not None:
        data = data[:limit]
    try:
        return [_question(position, item, level) for position, item in enumerate(data)]
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None


def _question(position: int, item: object, level: str) -> EvalQuestion:
    if not isinstance(item, dict):
        raise _fail(position, item, f"is a {type(item).__name__}, not an object")
    for key in ("question", "answer", "context", "supporting_facts"):
        if key not in item:
            raise _fail(position, item, f"missing key {key!r}")
    context, support = item["context"], item["supporting_facts"]
    if not isinstance(item["question"], str) or not item["question"].strip():
        raise _fail(position, item, "'question' must be a non-empty string")
    if not isinstance(item["answer"], str):
        raise _fail(position, item, "'answer' must be a string")
    if not isinstance(context, dict) or not isinstance(context.get("title"), list) or not isinstance(context.get("sentences"), list):
        raise _fail(position, item, "'context' must hold lists 'title' and 'sentences'")
    if len(context["title"]) != len(context["sentences"]):
        raise _fail(position, item, f"context has {len(context['title'])} titles but {len(context['sentences'])} sentence lists")
    if not isinstance(support, dict) or not isinstance(support.get("title"), list) or not isinstance(support.get("sent_id"), list):
        raise _fail(position, item, "'supporting_facts' must hold lists 'title' and 'sent_id'")
    if len(support["title"]) != len(support["sent_id"]) or not support["title"]:
        raise _fail(position, item, "supporting_facts 'title' and 'sent_id' must be non-empty lists of equal length")
    candidates: list[str] = []
    where: dict[tuple[str, int], int] = {}
    paragraph_of: dict[str, int] = {}
    for p, (title, sentences) in enumerate(zip(context["title"], context["sentences"])):
        if not isinstance(title, str) or not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise _fail(position, item, f"context paragraph {p} must be a title and a list of sentence strings")
        paragraph_of.setdefault(title, p)
        if level == "paragraph":
            candidates.append(f"{title}: {' '.join(s.strip() for s in sentences)}")
        else:
            for s, sentence in enumerate(sentences):
                where[(title, s)] = len(candidates)
                candidates.append(f"{title}: {sentence.strip()}")
    gold: set[int] = set()
    for title, sent_id in zip(support["title"], support["sent_id"]):
        if title not in paragraph_of:
            raise _fail(position, item, f"supporting fact title {title!r} is not in its context")
        if not isinstance(sent_id, int) or not 0 <= sent_id < len(context["sentences"][paragraph_of[title]]):
            raise _fail(position, item, f"supporting fact ({title!r}, {sent_id!r}) points outside its paragraph")
        gold.add(paragraph_of[title] if level == "paragraph" else where[(title, sent_id)])
    qid = str(item.get("id", item.get("_id", position)))
    group = item.get("type") if isinstance(item.get("type"), str) else None
    return EvalQuestion(qid, item["question"], item["answer"], candidates, frozenset(gold), group)

