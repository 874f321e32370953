"""The rerank API's names and its JSON Schemas (request and answer), for :mod:`.rerank_api` and the OpenAPI document.

Example:
    >>> rerank_request_schema()["required"], RERANK_PATHS[0], SELECTED_THRESHOLD
    (['query', 'documents'], '/v1/rerank', 0.5)
"""

from __future__ import annotations

from typing import Any

__all__ = ["rerank_request_schema", "rerank_answer_schema", "RERANK_PATHS", "SELECTED_THRESHOLD", "EXTENSION",
           "COMPATIBLE_KEYS"]

#: the routes that answer a rerank body
RERANK_PATHS = ("/v1/rerank", "/rerank", "/v2/rerank")
#: a selected passage's relevance_score is at or above this; every other document's is below
SELECTED_THRESHOLD = 0.5
#: the extension field, in a request (``/v1/select``'s options) and in an answer (the selection)
EXTENSION = "meteora_edge"
#: keys other rerank servers take that the selection has no use for; accepted and left unused
COMPATIBLE_KEYS = ("max_tokens_per_doc", "max_chunks_per_doc", "truncation", "rank_fields")

_DOCUMENT = {"oneOf": [{"type": "string"}, {"type": "object", "required": ["text"],
                                             "properties": {"text": {"type": "string"}}}]}


def rerank_request_schema() -> dict[str, Any]:
    """JSON Schema of a rerank body (``POST /v1/rerank``, ``/rerank``, ``/v2/rerank``)."""
    ignored = {key: {"description": "Accepted for compatibility with other rerank servers; not used."}
               for key in COMPATIBLE_KEYS}
    ignored["rank_fields"] = {"type": ["array", "null"], "items": {"const": "text"},
                              "description": "Only [\"text\"]: documents are ranked by their text."}
    return {"title": "RerankRequest", "type": "object", "required": ["query", "documents"],
            "additionalProperties": False,
            "description": "The Jina / Cohere rerank request. One result per document that 'top_n' allows; the "
                           "selected passages first, at or above relevance 0.5.",
            "properties": {
                "model": {"type": ["string", "null"], "description": "The server's rerank model (GET /v1/models, "
                                                                     "role 'rerank'); any other name is refused."},
                "query": {"type": "string", "minLength": 1},
                "documents": {"type": "array", "minItems": 1, "items": _DOCUMENT},
                "top_n": {"type": ["integer", "null"], "minimum": 1,
                          "description": "At most this many results, best first (default: one per document)."},
                "return_documents": {"type": ["boolean", "null"], "default": False,
                                     "description": "Each result carries its document as {\"text\": ...}."},
                EXTENSION: {"type": "object", "description": "/v1/select's options (rationales, t_max, verify, "
                                                             "llm_rerank, the pipeline settings …) with its "
                                                             "defaults; not query, chunks, index or detail.",
                            "additionalProperties": True},
                **ignored}}


def rerank_answer_schema() -> dict[str, Any]:
    """JSON Schema of a rerank answer."""
    result = {"type": "object", "required": ["index", "relevance_score", EXTENSION], "properties": {
        "index": {"type": "integer", "minimum": 0, "description": "The document's position in 'documents'."},
        "relevance_score": {"type": "number", "minimum": 0, "maximum": 1,
                            "description": "At or above 0.5 for a selected passage, below it for any other."},
        "document": {"type": "object", "properties": {"text": {"type": "string"}}},
        EXTENSION: {"type": "object", "required": ["selected"], "properties": {
            "selected": {"type": "boolean"}, "rank": {"type": ["integer", "null"],
                                                      "description": "Its place in the selection's context order."},
            "score": {"type": ["number", "null"], "description": "The pipeline's own score."},
            "score_name": {"type": ["string", "null"]}}}}}
    return {"title": "RerankAnswer", "type": "object", "required": ["model", "results", EXTENSION], "properties": {
        "model": {"type": "string"}, "results": {"type": "array", "items": result},
        EXTENSION: {"type": "object", "properties": {
            "threshold": {"const": SELECTED_THRESHOLD},
            "selected": {"type": "array", "items": {"type": "integer"},
                         "description": "The selected documents' indexes, in context order."},
            "tokens": {"type": "integer", "description": "The selected passages' tokens."}}}}}
