"""The HTTP API described as data: JSON Schemas of a request and an answer, and the OpenAPI 3.1
document ``GET /openapi.json`` serves.

:func:`request_json_schema` is the one source of the request's shape: the request keys (a test
holds them equal to ``REQUEST_KEYS`` of :mod:`.select_request`) and :class:`PipelineConfig`'s
fields (their types; :func:`described` adds choices, defaults and the docstring's words), so a
setting added to the pipeline appears in the document without an edit here. Ranges are not
repeated, except that a resource limit's default is its ``maximum``: the server checks them and
answers 400 with the constraint. :func:`answer_schema` describes ``select``'s JSON object (see
:mod:`..pipeline.report`). The keys and their rules are :mod:`..pipeline.request`'s
(``REQUEST_KEYS``, ``SETTING_KEYS``, ``LIMIT_KEYS``); this document adds what a reader of the API
needs (descriptions, choices, each limit's maximum). It is the only JSON Schema of a request:
:mod:`.select_request` re-exports it.

Example:
    >>> doc = openapi_document()
    >>> doc["openapi"], sorted(doc["paths"])[-3:]
    ('3.1.0', ['/v1/rerank', '/v1/select', '/v2/rerank'])
    >>> request = doc["components"]["schemas"]["SelectRequest"]["properties"]
    >>> request["t_max"]["type"], request["oversize"]["enum"]
    (['integer', 'null'], ['drop', 'truncate'])
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Any

from ..pipeline.config import LEXICAL_SCORERS, RATIONALE_STRATEGIES, PipelineConfig
from ..pipeline.ladder import RUNGS
from ..pipeline.report import DETAILS, FORMAT, VERSION
from ..selection.ecse import POOLED_CUTS
from ..selection.stages import SCORINGS
from ..pipeline.request import LIMIT_KEYS, RATIONALE_PROMPTS, SETTING_KEYS
from .rerank_schema import RERANK_PATHS, rerank_answer_schema, rerank_request_schema

__all__ = ["request_json_schema", "described", "answer_schema", "openapi_document", "package_version", "ERROR_SCHEMA"]

_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}
_CHOICES: dict[str, tuple[str, ...]] = {"scoring": SCORINGS, "lexical_scorer": LEXICAL_SCORERS, "pooled_cut": POOLED_CUTS, "verification": RUNGS,
                                        "oversize": ("drop", "truncate")}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "properties": {"error": {"type": "string", "description": "What failed, the value and the fix, in one line."}},
}
_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_STRING = {"type": ["string", "null"]}


def _setting_docs() -> dict[str, str]:
    """Each setting's description, from the ``Args:`` section of PipelineConfig's docstring."""
    text = (PipelineConfig.__doc__ or "").split("Args:", 1)[-1]
    docs: dict[str, str] = {}
    for match in re.finditer(r"^ {8}([\w /]+?): (.*?)(?=^ {8}[\w /]+?: |\Z)", text, re.S | re.M):
        description = " ".join(match.group(2).split()).replace("``", "`")
        for name in match.group(1).split(" / "):
            docs[name.strip()] = description
    return docs


def _setting_schema(annotation: str) -> dict[str, Any]:
    kinds = [part.strip() for part in annotation.split("|")]
    types = [_TYPES[k] for k in kinds if k in _TYPES] + (["null"] if "None" in kinds else [])
    return {"type": types[0] if len(types) == 1 else types}


def described(schema: dict[str, Any]) -> dict[str, Any]:
    """A request schema with each pipeline setting's choices and description added where it has none.

    The descriptions come from :class:`PipelineConfig`'s docstring, with the default over an index
    (given chunks run only the phases asked for, see ``select_config``). Works on any schema whose
    properties are named after the settings.

    Returns:
        A new schema; ``schema`` is not changed.
    """
    docs, defaults = _setting_docs(), PipelineConfig()
    properties = {name: dict(value) for name, value in schema.get("properties", {}).items()}
    for name, prop in properties.items():
        if name not in SETTING_KEYS:
            continue
        if name in _CHOICES and "enum" not in prop:
            prop["enum"] = list(_CHOICES[name])
        if not prop.get("description"):
            default = json.dumps(getattr(defaults, name))
            prop["description"] = f"{docs.get(name, name)} Default over an index: {default}."
    return {**schema, "properties": properties}


_RATIONALE_ITEM = {"oneOf": [
    {"type": "string"},
    {"type": "object", "required": ["text"], "properties": {
        "text": {"type": "string"}, "label": _NULLABLE_STRING, "flag_instructions": _NULLABLE_STRING}},
]}
_CHUNK = {"oneOf": [
    {"type": "string"},
    {"type": "object", "description": "A chunk: its text under 'text', 'content' or 'page_content', with any "
                                      "metadata ('source', 'start_pos'/'end_pos', 'metadata', other keys).",
     "anyOf": [{"required": ["text"]}, {"required": ["content"]}, {"required": ["page_content"]}]},
]}


def request_json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of one ``POST /v1/select`` body, also a stdio line's body or ``params``.

    The one function the OpenAPI document takes the request's shape from; its keys are the select
    runtime's request keys (a test holds them equal). :func:`described` adds the settings'
    choices and descriptions.

    Returns:
        An object schema whose properties are exactly the keys the server reads; unknown keys
        are refused (``additionalProperties: false``).
    """
    properties: dict[str, Any] = {
        "query": {"type": "string", "description": "The question (select --query)."},
        "chunks": {"type": "array", "minItems": 1, "items": _CHUNK,
                   "description": "The candidates (the contents of a --chunks file); without it, an index is "
                                  "searched."},
        "index": {"type": "string", "description": "The name of an index the server was started with (its folder "
                                                   "name); without 'chunks' and 'index', the first one."},
        "rationales": {"anyOf": [{"type": "string", "enum": list(RATIONALE_STRATEGIES)},
                                 {"type": "string", "description": "A tagged rationale text."},
                                 {"type": "array", "minItems": 1, "items": _RATIONALE_ITEM}],
                       "description": "A strategy (auto, query, llm+auto), a rationale text, or a list of rationales."},
        "detail": {"type": "string", "enum": list(DETAILS), "default": "summary",
                   "description": "'full' adds every candidate, verdict and stage (select --trace)."},
        "generate_rationales": {"type": "boolean", "default": False,
                                "description": "The GGUF model writes the rationales (the server needs --llm)."},
        "verify": {"type": "boolean", "default": False,
                   "description": "The GGUF model verifies the candidates (the server needs --llm)."},
        "llm_rerank": {"type": "boolean", "default": False,
                       "description": "The GGUF model judges ECSE's best candidates (select --llm-rerank)."},
        "rationale_prompt": {"type": "string", "enum": list(RATIONALE_PROMPTS),
                             "description": "How the GGUF model writes rationales (select --rationale-prompt)."},
        "num_rationales": {"type": "integer", "minimum": 1, "maximum": 20,
                           "description": "How many rationales the GGUF model writes (select --num-rationales)."},
        "reject": {"anyOf": [{"type": "string", "minLength": 1},
                             {"type": "array", "items": {"type": "string", "minLength": 1}}],
                   "description": "Rejection rules in plain words: the GGUF verifier flags a chunk that matches one "
                                  "and the LLM rerank scores it down (needs verify or llm_rerank; select --reject)."},
    }
    for f in fields(PipelineConfig):
        if f.name in SETTING_KEYS:
            properties[f.name] = _setting_schema(str(f.type))
            if f.name in LIMIT_KEYS:  # a request may only lower the server's limit
                properties[f.name]["maximum"] = f.default
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "SelectRequest", "type": "object",
            "properties": properties, "additionalProperties": False,
            "description": "Needs 'query' or 'rationales'; 'chunks' and 'index' exclude each other. The pipeline "
                           "settings keep select's defaults (given chunks run only the phases asked for)."}


def answer_schema() -> dict[str, Any]:
    """JSON Schema of ``select``'s JSON object, the answer of ``POST /v1/select`` (``detail: full`` adds keys)."""
    passage = {"type": "object", "required": ["rank", "id", "text", "score", "tokens", "metadata"], "properties": {
        "rank": {"type": "integer", "minimum": 1}, "id": {"description": "The chunk id: a position in 'chunks', "
                                                                         "or the index's chunk id."},
        "text": {"type": "string"}, "source": _NULLABLE_STRING, "document": {},
        "start_pos": _NULLABLE_INT, "end_pos": _NULLABLE_INT, "score": {"type": "number"},
        "score_name": _NULLABLE_STRING, "tokens": _NULLABLE_INT, "metadata": {"type": "object"}}}
    phase = {"type": "object", "required": ["name", "summary", "ms"], "properties": {
        "name": {"type": "string"}, "summary": {"type": "string"}, "ms": {"type": "number"}}}
    rationale = {"type": "object", "required": ["index", "text"], "properties": {
        "index": {"type": "integer"}, "label": _NULLABLE_STRING, "text": {"type": "string"},
        "flag_instructions": _NULLABLE_STRING}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Selection", "type": "object",
            "required": ["format", "version", "query", "passages", "tokens", "phases", "rationales",
                         "rationale_source", "encoder"],
            "properties": {
                "format": {"const": FORMAT}, "version": {"const": VERSION}, "query": _NULLABLE_STRING,
                "passages": {"type": "array", "items": passage}, "tokens": {"type": "integer"},
                "phases": {"type": "array", "items": phase}, "rationales": {"type": "array", "items": rationale},
                "rationale_source": {"type": "string"}, "encoder": {"type": "string"},
                "selected_indices": {"type": "array"}, "details": {"type": "object"},
                "verdicts": {"type": "array"}, "trace": {"type": "object"}}}


def package_version() -> str:
    """meteora-edge's installed version (``info.version`` of the document), ``"0"`` when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("meteora-edge")
    except metadata.PackageNotFoundError:
        return "0"


def _without_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "$schema"}


def _errors(*statuses: int) -> dict[str, Any]:
    what = {400: "A bad request: malformed JSON or HTTP, an unknown key, a wrong type, a setting out of range.",
            401: "Missing or wrong token (the server was started with --token).",
            404: "An unknown path or index name.", 408: "The headers or the body came too slowly.",
            413: "The body is over --max-body-mb.", 415: "The body was not sent as application/json.",
            421: "The Host header does not name the loopback address the server listens on.",
            500: "A model or the index failed; the message says what.",
            503: "Busy: --workers selections run and --queue more wait, or --max-connections are open; or the "
                 "request waited --request-timeout for a worker, or the server is shutting down. "
                 "Retry after the Retry-After seconds.",
            504: "The selection ran past --request-timeout and was stopped."}
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    out = {str(s): {"description": what[s], "content": error} for s in statuses}
    if 503 in statuses:
        out["503"]["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}
    return out


def _get(summary: str, schema: dict[str, Any], *statuses: int, parameters: list[Any] | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "responses": {
        "200": {"description": summary, "content": {"application/json": {"schema": schema}}}, **_errors(*statuses)}}
    if parameters:
        operation["parameters"] = parameters
    return {"get": operation}


def openapi_document(version: str = "0", *, token: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the server's endpoints, from :func:`request_json_schema` and :func:`answer_schema`.

    Args:
        version: the server's version, shown as ``info.version``.
        token: the server requires ``Authorization: Bearer`` (adds the security scheme).

    Returns:
        A JSON-ready dict.
    """
    common = (400, 401, 404, 408, 421, 500, 503)
    select = {"post": {
        "summary": "Select the evidence for a question among chunks or an index",
        "operationId": "select",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/SelectRequest"},
            "example": {"query": "who may terminate?",
                        "chunks": ["Either party may terminate.", "Fees are monthly."]}}}},
        "responses": {"200": {"description": "select's JSON object", "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Selection"}}}}, **_errors(*common, 413, 415, 504)},
    }}
    rerank = {"post": {
        "summary": "Rerank documents for a query (the Jina / Cohere shape): the selected passages first",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/RerankRequest"},
            "example": {"query": "who may terminate?", "top_n": 2,
                        "documents": ["Either party may terminate.", "Fees are monthly."]}}}},
        "responses": {"200": {"description": "One result per document that top_n allows, best first", "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/RerankAnswer"}}}},
            **_errors(*common, 413, 415, 504)},
    }}
    name = [{"name": "name", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "An index's name; the first index when absent."}]
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "meteora-edge", "version": version,
                 "description": "Offline evidence selection for RAG. Every error is one line of JSON, "
                                "`{\"error\": \"what failed, the value and the fix\"}`; "
                                "every answer carries X-Request-Id (the request's own, or a new one)."},
        "paths": {
            "/v1/select": select,
            **{path: {"post": {**rerank["post"], "operationId": "rerank" + path.replace("/", "_")}}
               for path in RERANK_PATHS},
            "/v1/models": _get("The loaded models and indexes", {"type": "object"}, 401, 421),
            "/v1/index": _get("index info of a served index", {"type": "object"}, 401, 404, 421, parameters=name),
            "/v1/health": _get("Versions, the bundle, the loaded models, the indexes and the limits",
                               {"type": "object"}, 401, 421),
            "/openapi.json": _get("This document", {"type": "object"}, 401, 421),
            "/docs": {"get": {"summary": "This document, browsable (Swagger UI)", "responses": {
                "200": {"description": "An HTML page", "content": {"text/html": {"schema": {"type": "string"}}}},
                **_errors(401, 404, 421)}}},
        },
        "components": {"schemas": {"SelectRequest": _without_dialect(described(request_json_schema())),
                                   "Selection": _without_dialect(answer_schema()),
                                   "RerankRequest": rerank_request_schema(), "RerankAnswer": rerank_answer_schema(),
                                   "Error": ERROR_SCHEMA}},
    }
    if token:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document


if __name__ == "__main__":  # python -m meteora_edge.integrations.api_schema > docs/openapi.json
    import sys

    sys.stdout.write(json.dumps(openapi_document(package_version()), indent=2, ensure_ascii=False) + "\n")
