"""Corpus-level evaluation data in the BEIR layout (used by BEIR, MTEB and most retrieval papers)::

    DIR/corpus.jsonl        {"_id": "d1", "title": "Tower", "text": "The tower is in Paris."}  one document a line
    DIR/queries.jsonl       {"_id": "q1", "text": "Which city is the tower in?"}                one query a line
    DIR/qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score                               header line optional

Scores are graded relevance: a document with a score above 0 is gold. The queries of a
split are those its qrels name; a query whose every score is 0 has no gold and is skipped
(counted). A query line may add ``"metadata": {"group": ...}`` (or ``"group"``) for
``--by group``. Every error names the file and the line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..fileio import parse_json, read_text_file
from ..index.corpus import SourceDocument

__all__ = ["CorpusQuery", "BeirData", "load_beir", "beir_text"]


@dataclass(frozen=True)
class CorpusQuery:
    """One query of a split: its graded relevance per corpus id, gold the ids graded above 0."""

    qid: str
    text: str
    relevance: dict[str, int]
    group: str | None = None

    @property
    def gold(self) -> frozenset[str]:
        return frozenset(doc for doc, grade in self.relevance.items() if grade > 0)


@dataclass(frozen=True)
class BeirData:
    """A BEIR folder's corpus and one split's queries (those with gold), in file order."""

    folder: str
    split: str
    documents: list[SourceDocument]
    queries: list[CorpusQuery]
    skipped_queries: int = 0


def beir_text(title: str, text: str) -> str:
    """A corpus document as the index holds it: ``title: text`` (the text alone without a title)."""
    return f"{title.strip()}: {text.strip()}" if title.strip() else text.strip()


def _lines(path: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(read_text_file(path).splitlines(), start=1):
        if line.strip():
            yield number, line


def _objects(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` per non-blank line, ``where`` naming the file and line."""
    for number, line in _lines(path):
        where = f"{path} line {number}"
        item = parse_json(line, where)
        if not isinstance(item, dict):
            raise InputError(f"{where}: must be a JSON object with '_id' and 'text', not a {type(item).__name__}")
        yield where, item


def _item_id(item: dict[str, Any], where: str, first: dict[str, str]) -> str:
    raw = item.get("_id")
    if not isinstance(raw, (str, int)) or isinstance(raw, bool) or not str(raw).strip():
        raise InputError(f"{where}: '_id' must be a non-empty string")
    key = str(raw)
    if key in first:
        raise InputError(f"{where}: duplicate _id {key!r} (first at {first[key]})")
    first[key] = "line " + where.rsplit(" ", 1)[-1]
    return key


def _read_corpus(path: str) -> list[SourceDocument]:
    documents, first = [], {}  # type: list[SourceDocument], dict[str, str]
    for where, item in _objects(path):
        doc_id = _item_id(item, where, first)
        title, text = item.get("title", ""), item.get("text")
        if not isinstance(text, str) or not isinstance(title, str) or not (text.strip() or title.strip()):
            raise InputError(f"{where}: document {doc_id!r} needs a 'text' string (and an optional 'title' string)")
        documents.append(SourceDocument(doc_id, beir_text(title, text), {"title": title} if title else {}, path))
    if not documents:
        raise InputError(f"{path} holds no documents; give one JSON object a line")
    return documents


def _read_queries(path: str) -> dict[str, tuple[str, str | None, str]]:
    queries, first = {}, {}  # type: dict[str, tuple[str, str | None, str]], dict[str, str]
    for where, item in _objects(path):
        qid = _item_id(item, where, first)
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}: query {qid!r} is empty; 'text' must be a non-empty string")
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        group = item.get("group", meta.get("group"))
        queries[qid] = (text, None if group is None else str(group), where)
    return queries


def _read_qrels(path: str, corpus: set[str], queries: dict[str, Any]) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for position, (number, line) in enumerate(_lines(path)):
        where = f"{path} line {number}"
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) != 3:
            raise InputError(f"{where}: expected query-id, corpus-id and score separated by tabs, "
                             f"got {len(parts)} field(s)")
        qid, doc, score = (p.strip() for p in parts)
        try:
            grade = int(score)
        except ValueError:
            if position == 0:  # the header line
                continue
            raise InputError(f"{where}: score {score!r} is not an integer") from None
        if qid not in queries:
            raise InputError(f"{where}: query-id {qid!r} is not in queries.jsonl")
        if doc not in corpus:
            raise InputError(f"{where}: corpus-id {doc!r} is not in corpus.jsonl")
        if doc in qrels.setdefault(qid, {}):
            raise InputError(f"{where}: duplicate judgement of ({qid!r}, {doc!r})")
        qrels[qid][doc] = grade
    if not qrels:
        raise InputError(f"{path} holds no judgements")
    return qrels


def load_beir(folder: str, *, split: str = "test", limit: int | None = None) -> BeirData:
    """Read a BEIR-layout folder: the corpus, the queries and one split's qrels.

    Args:
        folder: holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.
        split: the qrels file to evaluate (``test``, ``dev``, ...).
        limit: only the first ``limit`` queries of the split (in queries.jsonl order).

    Raises:
        InputError: a missing file or split (naming the splits there are), a malformed
            line, an empty query, a duplicate id, or a qrels id missing from the corpus or
            the queries — each naming the file and line.
    """
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not os.path.isfile(os.path.join(folder, name)):
            raise InputError(f"{folder} is not a BEIR folder: {name} is missing (expected corpus.jsonl, queries.jsonl "
                             "and qrels/<split>.tsv)")
    qrels_path = os.path.join(folder, "qrels", f"{split}.tsv")
    if not os.path.isfile(qrels_path):
        there = sorted(n[:-4] for n in os.listdir(os.path.join(folder, "qrels")) if n.endswith(".tsv")) \
            if os.path.isdir(os.path.join(folder, "qrels")) else []
        raise InputError(f"{folder} has no split {split!r}: {qrels_path} is missing; "
                         + (f"splits there: {', '.join(there)}" if there else "the folder has no qrels/*.tsv"))
    documents = _read_corpus(os.path.join(folder, "corpus.jsonl"))
    queries = _read_queries(os.path.join(folder, "queries.jsonl"))
    qrels = _read_qrels(qrels_path, {d.source_id for d in documents}, queries)
    chosen, skipped = [], 0
    for qid, (text, group, _) in queries.items():
        if qid not in qrels:
            continue
        query = CorpusQuery(qid, text, qrels[qid], group)
        if not query.gold:
            skipped += 1
            continue
        chosen.append(query)
    if not chosen:
        raise InputError(f"{qrels_path}: no query has a document scored above 0, so there is nothing to evaluate")
    if limit is not None:
        chosen = chosen[:limit]
    return BeirData(folder, split, documents, chosen, skipped)
