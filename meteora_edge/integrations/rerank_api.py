"""The rerank API that RAG apps already speak (``POST /v1/rerank``, ``/rerank``, Cohere's ``/v2/rerank``),
answered by the same selection as ``/v1/select``.

A body is ``{"model", "query", "documents", "top_n", "return_documents"}`` (the Jina and Cohere
shape): ``documents`` are strings or ``{"text": …}`` objects. The query and the documents become
one :class:`~meteora_edge.pipeline.request.SelectRequest` (the documents are its chunks), run by
the server's runtime like any ``/v1/select`` body. The answer has **one result per document**
(as many as ``top_n`` allows), best first, each with its ``index`` in ``documents`` and a
``relevance_score`` in [0, 1]:

* the *selected* passages come first, each scored at or above :data:`SELECTED_THRESHOLD` (0.5):
  ``0.5 + 0.5·σ(score)``, ``score`` the pipeline's priority score (``score_name``);
* every other document scores below it: ``0.5·σ(score)`` with its ECSE selection score (its
  retrieval score when it has none), capped just under 0.5; a document with no text scores 0.

So an app that keeps the results at or above a relevance threshold of 0.5 keeps exactly the
selection, and one that sorts the results by ``index`` and zips their scores with its documents
(Open WebUI) gets a score for every document. The extension field ``meteora_edge`` marks the
selection: on each result ``{"selected", "rank", "score", "score_name"}`` and at the top
``{"threshold", "selected", "tokens"}``; in a request it carries ``/v1/select``'s options
(``rationales``, ``t_max``, ``verify``, ``llm_rerank``, any pipeline setting …), whose
defaults stay ``/v1/select``'s.

Example:
    >>> from meteora_edge.integrations.service import SelectService
    >>> body = {"query": "who may terminate?", "documents": ["Fees are monthly.", "Either party may terminate."]}
    >>> answer = rerank(SelectService(), body)
    >>> [(r["index"], r["meteora_edge"]["selected"]) for r in answer["results"]]
    [(1, True), (0, False)]
    >>> answer["results"][0]["relevance_score"] >= 0.5 > answer["results"][1]["relevance_score"]
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..pipeline.request import REQUEST_KEYS, SETTING_KEYS, RequestError, json_body, refuse_unknown_keys, request_from_json
from .rerank_schema import COMPATIBLE_KEYS, EXTENSION, RERANK_PATHS, SELECTED_THRESHOLD
from .select_request import read_json_body

__all__ = ["rerank", "rerank_model_name", "relevance_scores", "RERANK_PATHS", "SELECTED_THRESHOLD"]

_KEYS = ("model", "query", "documents", "top_n", "return_documents", EXTENSION)
_OWN = ("query", "chunks", "index", "detail")  # a rerank body gives these itself
_BELOW = SELECTED_THRESHOLD - 1e-6


def rerank_model_name(bundle: str | None) -> str:
    """The model name the rerank routes answer to: the bundle folder's name (``meteora-edge`` without a bundle)."""
    return Path(bundle).name if bundle else "meteora-edge"


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def relevance_scores(count: int, selected: Sequence[tuple[int, float]],
                     others: Mapping[int, float | None]) -> list[tuple[int, float, bool]]:
    """Every document's relevance in [0, 1], best first: the selected ones at or above the threshold.

    Args:
        count: how many documents the request has.
        selected: (position, priority score) of each selected document, best first.
        others: position → the score of a document that was not selected (None: it has none).

    Returns:
        (position, relevance_score, selected) for each of the ``count`` documents, sorted by
        relevance_score from the highest (ties keep the selection's order, then the positions).
    """
    rows: list[tuple[int, float, bool]] = []
    for position, score in selected:
        rows.append((position, max(SELECTED_THRESHOLD, round(0.5 + 0.5 * _sigmoid(score), 6)), True))
    chosen = {p for p, _ in selected}
    for position in range(count):
        if position in chosen:
            continue
        score = others.get(position)
        value = 0.0 if score is None else min(_BELOW, round(0.5 * _sigmoid(score), 6))
        rows.append((position, value, False))
    order = {p: i for i, (p, _) in enumerate(selected)}
    return sorted(rows, key=lambda r: (-r[1], order.get(r[0], len(order)), r[0]))


def _document_text(document: Any, i: int) -> str:
    if isinstance(document, str):
        return document
    if isinstance(document, Mapping) and isinstance(document.get("text"), str):
        return document["text"]
    raise RequestError(f"'documents'[{i}] must be a string or an object with a 'text' string, "
                       f"got {type(document).__name__ if not isinstance(document, Mapping) else 'an object without text'}")


def _checked(data: Any) -> tuple[str | None, str, list[str], int | None, bool, dict[str, Any]]:
    refuse_unknown_keys(json_body(data), (*_KEYS, *COMPATIBLE_KEYS),
                        f"a rerank request takes {', '.join(_KEYS)} (and ignores {', '.join(COMPATIBLE_KEYS)})")
    model, query = data.get("model"), data.get("query")
    if model is not None and not isinstance(model, str):
        raise RequestError(f"'model' must be a string, got {type(model).__name__}")
    if not isinstance(query, str) or not query.strip():
        raise RequestError("a rerank request needs 'query', a non-empty string")
    documents = data.get("documents")
    if not isinstance(documents, list) or not documents:
        raise RequestError("'documents' must be a non-empty list of strings or {\"text\": ...} objects")
    texts = [_document_text(d, i) for i, d in enumerate(documents)]
    top_n = data.get("top_n")
    if top_n is not None and (not isinstance(top_n, int) or isinstance(top_n, bool) or top_n < 1):
        raise RequestError(f"'top_n' must be an integer >= 1, got {top_n!r}")
    give = data.get("return_documents")
    if give is not None and not isinstance(give, bool):
        raise RequestError(f"'return_documents' must be true or false, got {type(give).__name__}")
    fields = data.get("rank_fields")
    if fields is not None and fields != ["text"]:
        raise RequestError(f"'rank_fields' must be [\"text\"] or absent (documents are ranked by their text), "
                           f"got {fields!r}")
    options = data.get(EXTENSION) or {}
    if not isinstance(options, Mapping):
        raise RequestError(f"'{EXTENSION}' must be an object of /v1/select options, got {type(options).__name__}")
    taken = sorted(set(options) & set(_OWN))
    if taken:
        raise RequestError(f"'{EXTENSION}' may not hold {', '.join(map(repr, taken))}: the rerank request gives "
                           "the query and the documents itself")
    unknown = sorted(set(options) - set(REQUEST_KEYS) - set(SETTING_KEYS))
    if unknown:
        raise RequestError(f"unknown key(s) {', '.join(map(repr, unknown))} in '{EXTENSION}'; it takes /v1/select's "
                           f"options: {', '.join(k for k in REQUEST_KEYS if k not in _OWN)} and the pipeline "
                           "settings")
    return model, query, texts, top_n, bool(give), dict(options)


def rerank(service: Any, body: bytes | str | Mapping[str, Any], *, check: Callable[[], None] | None = None
           ) -> dict[str, Any]:
    """Answer one rerank body with the server's selection (see the module doc).

    Args:
        service: the server's :class:`~meteora_edge.integrations.service.SelectService`.
        body: the raw JSON (bytes or text) or an already parsed object.
        check: the request's deadline, as :meth:`SelectService.select
            <meteora_edge.integrations.service.SelectService.select>` takes it.

    Returns:
        ``{"model", "results": [{"index", "relevance_score", "document"?, "meteora_edge"}], "meteora_edge"}``.

    Raises:
        InputError, ConfigError: a bad request, or a ``model`` this server does not serve.
        ModelError, LocalIndexError: a model failed while running.
    """
    model, query, texts, top_n, give, options = _checked(body if isinstance(body, Mapping) else read_json_body(body))
    served = rerank_model_name(getattr(service, "bundle", None))
    if model and model != served:
        raise RequestError(f"this server has no model {model!r}; its rerank model is {served!r} "
                           "(GET /v1/models lists it)")
    usable = [i for i, text in enumerate(texts) if text.strip()]
    selected: list[tuple[int, float]] = []
    others: dict[int, float | None] = {}
    rank_of: dict[int, dict[str, Any]] = {}
    data: dict[str, Any] = {"tokens": 0}
    if usable:
        request = request_from_json({**options, "query": query, "chunks": [texts[i] for i in usable],
                                     "detail": "full"})
        data = service.run(request, check=check)
        for passage in data["passages"]:
            position = usable[passage["id"]]
            selected.append((position, float(passage["score"])))
            rank_of[position] = {"rank": passage["rank"], "score": passage["score"],
                                 "score_name": passage["score_name"]}
        for candidate in data["trace"]["candidates"]:
            position, name = usable[candidate["chunk_id"]], "selection" if "ecse_score" in candidate else "retrieval"
            others[position] = candidate.get("ecse_score", candidate.get("retrieval_score"))
            rank_of.setdefault(position, {"rank": None, "score": others[position], "score_name": name})
    rows = relevance_scores(len(texts), selected, others)
    results = []
    for position, value, chosen in rows[:top_n]:
        result: dict[str, Any] = {"index": position, "relevance_score": value}
        if give:
            result["document"] = {"text": texts[position]}
        result[EXTENSION] = {"selected": chosen, **rank_of.get(position, {"rank": None, "score": None,
                                                                         "score_name": None})}
        results.append(result)
    return {"model": served, "results": results,
            EXTENSION: {"threshold": SELECTED_THRESHOLD, "selected": [p for p, _ in selected],
                        "tokens": data["tokens"]}}
