"""Labelled rationale candidates from HotpotQA-format data, without a language model.

For every question a fixed set of candidate rationale sets is written from its text and
its paragraph titles; ECSE (:class:`~meteora_edge.MeteoraSelector`) selects sentences with
each set; the selection is kept with the gold sentence positions, so
:func:`~meteora_edge.training.dpo_data.prepare_preferences` can label candidates by gold hits.

Candidates, in this order (a set is left out when it would be empty or repeat an earlier one):

* ``question`` — the question itself;
* ``keywords`` — the question without stop words;
* ``support`` — one ``[Title] Title: keywords`` rationale per supporting paragraph title;
* ``support+question`` — the first two of those and ``[Question] question``;
* ``distractor`` / ``distractor+question`` — the same for the first two distractor titles;
* ``mixed`` — the first supporting and the first distractor rationale;
* ``phrases`` — up to three capitalised phrases of the question, ``[Phrase] Phrase``.

Titles of supporting paragraphs come from the gold annotation: the candidates are built to
contrast, and only the labels decide what is preferred.

Example:
    >>> from meteora_edge.training.dpo_derive import candidate_rationales
    >>> sets = candidate_rationales("Were Ed Wood and Scott Derrickson of the same nationality?",
    ...                            ["Ed Wood"], ["Tyler Bates"])
    >>> sets["support"]
    ['[Ed Wood] Ed Wood: Scott Derrickson nationality']
    >>> sets["phrases"]
    ['[Ed Wood] Ed Wood', '[Scott Derrickson] Scott Derrickson']
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..selection.ecse import MeteoraSelector
from ..models.encoders import EncoderLike, HashingEncoder, embed
from ..errors import InputError
from ..evaluation import load_hotpot
from ..fileio import read_json_file

__all__ = ["CANDIDATE_NAMES", "candidate_rationales", "derive_candidates"]

CANDIDATE_NAMES = (
    "question", "keywords", "support", "support+question", "distractor", "distractor+question", "mixed", "phrases",
)
_STOP_WORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been being which who whom whose what "
    "when where why how did do does that this these those it its as than same both".split()
)
_WORD = re.compile(r"[A-Za-z0-9'][A-Za-z0-9'-]*")
_PHRASE = re.compile(r"[A-Z][\w'.-]*(?:\s+(?:of\s+|the\s+|de\s+|von\s+)?[A-Z][\w'.-]*)*")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _keywords(question: str, drop: str = "") -> str:
    dropped = {w.lower() for w in _words(drop)}
    return " ".join(w for w in _words(question) if w.lower() not in _STOP_WORDS and w.lower() not in dropped)


def _phrases(question: str) -> list[str]:
    """Capitalised phrases; a leading stop word (the question's own capital, "Were …") is cut off."""
    found = []
    for match in _PHRASE.finditer(question):
        words = match.group().split()
        while words and words[0].lower() in _STOP_WORDS:
            words = words[1:]
        found.append(" ".join(words))
    return found


def _about(title: str, question: str) -> str:
    rest = _keywords(question, drop=title)
    return f"[{title}] {title}: {rest}" if rest else f"[{title}] {title}"


def candidate_rationales(question: str, supporting_titles: Sequence[str], distractor_titles: Sequence[str]) -> dict[str, list[str]]:
    """The candidate rationale sets for one question (see the module doc), by name.

    Returns:
        Non-empty rationale lists of at most three items, in :data:`CANDIDATE_NAMES` order.
    """
    q = " ".join(question.split())
    support = [_about(t, q) for t in supporting_titles[:3]]
    distract = [_about(t, q) for t in distractor_titles[:2]]
    asked = f"[Question] {q}"
    phrases = [p for p in dict.fromkeys(_phrases(q)) if len(p) > 1][:3]
    sets = {
        "question": [q],
        "keywords": [_keywords(q)],
        "support": support,
        "support+question": support[:2] + [asked] if support else [],
        "distractor": distract,
        "distractor+question": distract[:2] + [asked] if distract else [],
        "mixed": support[:1] + distract[:1] if support and distract else [],
        "phrases": [f"[{p}] {p}" for p in phrases],
    }
    out: dict[str, list[str]] = {}
    for name in CANDIDATE_NAMES:
        rationales = [r for r in sets[name] if r.strip()]
        if rationales and rationales not in out.values():
            out[name] = rationales
    return out


def _titles(item: Any) -> tuple[list[str], list[str]]:
    """(supporting titles in annotation order, other titles in context order), without repeats."""
    support = list(dict.fromkeys(item["supporting_facts"]["title"]))
    others = [t for t in dict.fromkeys(item["context"]["title"]) if t not in support]
    return support, others


def derive_candidates(
    path: str | os.PathLike[str],
    *,
    encoder: EncoderLike | None = None,
    expansion_window: int = 0,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Labelled-candidate records for every question of a HotpotQA-format file.

    Candidates are the question's sentences (``"Title: sentence"``); gold are the positions
    of its supporting sentences.

    Args:
        path: HotpotQA JSON (Hugging Face ``datasets`` layout).
        encoder: what ECSE embeds with (default: the hashing encoder).
        expansion_window: ECSE neighbour expansion (0: sentences stand alone).
        limit: only the first ``limit`` questions.
        progress: called with (done, total) after each question.

    Returns:
        Records ``{"id", "query", "answer", "gold", "chunks", "candidates": [{"name",
        "rationales", "selected"}]}`` ready for :func:`~meteora_edge.training.dpo_data.prepare_preferences`.

    Raises:
        InputError: the file is unreadable or a question is malformed (named).
    """
    questions = load_hotpot(str(path), level="sentence", limit=limit)
    raw = read_json_file(path)
    items = raw["data"] if isinstance(raw, dict) else raw
    encoder = encoder if encoder is not None else HashingEncoder()
    selector = MeteoraSelector(encoder, expansion_window=expansion_window)
    records = []
    for done, (item, question) in enumerate(zip(items, questions), start=1):
        support, others = _titles(item)
        if not question.candidates:
            raise InputError(f"question {done - 1} ({question.question[:60]!r}) has no context sentences")
        vectors = embed(encoder, question.candidates)
        candidates = [
            {"name": name, "rationales": rationales,
             "selected": selector.select(question.candidates, rationales, chunk_vectors=vectors).selected_indices}
            for name, rationales in candidate_rationales(question.question, support, others).items()
        ]
        records.append({
            "id": question.qid,
            "query": question.question,
            "answer": question.answer,
            "gold": sorted(question.gold),
            "chunks": question.candidates,
            "candidates": candidates,
        })
        if progress is not None:
            progress(done, len(questions))
    return records
