"""One ``/v1/select`` request body, read and checked: the ``select`` command's inputs as JSON.

The body is one JSON object. Its keys mirror ``select``'s options, so the same input gives
the same selection through the CLI, HTTP and stdio:

* ``query`` — the question (``--query``);
* ``chunks`` — a non-empty list of chunks, strings or objects with ``text``/``content``/
  ``page_content`` and any metadata (the contents of a ``--chunks`` file), or
* ``index`` — the name of one of the indexes the server was started with (``--index``);
  without ``chunks`` and ``index`` the server's first index is used;
* ``rationales`` — ``"auto"`` or ``"query"`` (the strategy), a tagged rationale text, or a
  list of rationale texts or ``{"text", "label", "flag_instructions"}`` objects;
* ``detail`` — ``"summary"`` (default) or ``"full"`` (``--trace``: every candidate, verdict and stage);
* ``generate_rationales`` / ``verify`` — the GGUF roles (the server needs ``--llm``);
* any :class:`~meteora_edge.pipeline.config.PipelineConfig` setting by its name (``k_init``,
  ``tau_relevance``, ``t_max``, …), with the defaults of :func:`~meteora_edge.pipeline.config.select_config`;
  the resource limits (``max_candidates``, ``max_chunk_chars``, ``max_rationales``) may only be lowered.

Example:
    >>> request = parse_select_request(b'{"query": "who may terminate?", "chunks": ["Either party may terminate."]}')
    >>> request.query, request.config.verification, request.detail
    ('who may terminate?', 'none', 'summary')
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..documents import check_unicode, document_texts
from ..errors import InputError
from ..pipeline.config import RATIONALE_STRATEGIES, PipelineConfig, select_config
from ..pipeline.report import DETAILS
from ..selection.rationales import Rationale, as_rationales

__all__ = ["SelectRequest", "parse_select_request", "REQUEST_KEYS", "SETTING_KEYS"]

REQUEST_KEYS = ("query", "chunks", "index", "rationales", "detail", "generate_rationales", "verify")
SETTING_KEYS = tuple(f.name for f in fields(PipelineConfig) if f.name != "rationales")
LIMIT_KEYS = ("max_candidates", "max_chunk_chars", "max_rationales")


@dataclass(frozen=True)
class SelectRequest:
    """A checked request: what :meth:`EvidencePipeline.run` and :func:`selection_json` need.

    Without ``chunks`` the candidates come from an index: the one ``index`` names, or the
    server's first when it is ``None``.
    """

    query: str | None
    chunks: list[Any] | None
    index: str | None
    rationales: list[Rationale]
    config: PipelineConfig
    detail: str = "summary"
    generate_rationales: bool = False
    verify: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


def _reject_constant(name: str) -> float:
    raise InputError(f"the body holds {name}, which is not JSON; send numbers only")


def read_json_body(body: bytes | str) -> Any:
    """Parse a request body as strict JSON (no NaN/Infinity, valid Unicode), or raise a one-line InputError."""
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        data = json.loads(text, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise InputError("the body is not UTF-8 text; send JSON") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError("the JSON is nested too deeply") from None
    except InputError:
        raise
    except ValueError:  # int() refuses an integer longer than sys.get_int_max_str_digits()
        raise InputError(f"the body holds an integer of more than {sys.get_int_max_str_digits()} digits; "
                         "send smaller numbers") from None
    check_strings(data)
    return data


def check_strings(data: Any) -> None:
    """Refuse a lone surrogate (a JSON escape like ``"\\ud800"``) in any key or string, as the CLI does.

    Raises:
        InputError: naming where the character is (``'query'``, ``'chunks'[0]['metadata']``, …).
    """
    pending: list[tuple[str, Any]] = [("the body", data)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            check_unicode(value, where)
        elif isinstance(value, dict):
            for key, item in value.items():
                check_unicode(key, f"a key of {where}")
                pending.append((f"'{key}'" if where == "the body" else f"{where}[{key!r}]", item))
        elif isinstance(value, list):
            pending.extend((f"{where}[{i}]", item) for i, item in enumerate(value))


def _typed(data: Mapping[str, Any], key: str, kinds: tuple[type, ...], what: str) -> Any:
    value = data.get(key)
    if value is not None and not isinstance(value, kinds):
        raise InputError(f"'{key}' must be {what}, got {type(value).__name__}")
    return value


def _rationales(value: Any) -> tuple[list[Rationale], str | None]:
    if value is None:
        return [], None
    if isinstance(value, str) and value.strip() in RATIONALE_STRATEGIES:
        return [], value.strip()
    if not isinstance(value, (str, list)):
        raise InputError(f"'rationales' must be \"auto\", \"query\", a text or a list, got {type(value).__name__}")
    found = as_rationales(value)
    if not found:
        raise InputError("'rationales' holds no rationale; give at least one, or drop the key")
    return [Rationale(r.text, i, r.label, r.flag_instructions) for i, r in enumerate(found, start=1)], None


def parse_select_request(body: bytes | str | Mapping[str, Any]) -> SelectRequest:
    """Read and check one request body, with ``select``'s rules and one-line messages.

    Args:
        body: the raw JSON (bytes or text) or an already parsed object.

    Returns:
        The checked :class:`SelectRequest`.

    Raises:
        InputError: malformed JSON, not an object, an unknown key, a value of the wrong type,
            no query and no rationale, or options that contradict each other.
        ConfigError: a pipeline setting out of range.
    """
    data = body if isinstance(body, Mapping) else read_json_body(body)
    if not isinstance(data, Mapping):
        raise InputError(f"the body must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(REQUEST_KEYS) - set(SETTING_KEYS))
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(map(repr, unknown))}; the request takes "
                         f"{', '.join(REQUEST_KEYS)} and the pipeline settings {', '.join(SETTING_KEYS)}")
    query = _typed(data, "query", (str,), "a string")
    chunks = _typed(data, "chunks", (list,), "a list of chunks")
    index = _typed(data, "index", (str,), "the name of an index of the server")
    detail = _typed(data, "detail", (str,), "\"summary\" or \"full\"") or "summary"
    generate = bool(_typed(data, "generate_rationales", (bool,), "true or false"))
    verify = bool(_typed(data, "verify", (bool,), "true or false"))
    if detail not in DETAILS:
        raise InputError(f"'detail' must be \"summary\" or \"full\", got {detail!r}")
    if chunks is not None and index is not None:
        raise InputError("give 'chunks' or 'index', not both")
    if chunks is not None:
        if not chunks:
            raise InputError("'chunks' is empty; give at least one chunk")
        document_texts(chunks)  # every chunk has a text
    has_query = bool(query and query.strip())
    if chunks is None and not has_query:
        raise InputError("a search of the index needs a non-empty 'query' (or give 'chunks')")
    rationales, strategy = _rationales(data.get("rationales"))
    if not rationales and not has_query:
        raise InputError("no rationale and no query; give 'query' or 'rationales'")
    if generate and (rationales or strategy):
        raise InputError("'generate_rationales' writes the rationales itself; drop 'rationales'")
    if generate and not has_query:
        raise InputError("'generate_rationales' needs a non-empty 'query'")
    settings = {k: data[k] for k in SETTING_KEYS if k in data}
    for key in LIMIT_KEYS:
        limit, value = getattr(PipelineConfig(), key), settings.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise InputError(f"{key} may only lower the server's limit ({limit}), got {value}")
    verification = settings.get("verification")
    if verify and verification not in (None, "llm", "auto"):
        raise InputError(f"'verify' uses the LLM verifier; it conflicts with verification {verification!r}")
    verify = verify or verification == "llm"
    if verify:
        settings["verification"] = "llm"
    config = select_config({**settings, "rationales": strategy}, from_index=chunks is None, chunks=chunks)
    return SelectRequest(
        query=query, chunks=chunks, index=index if chunks is None else None, rationales=rationales, config=config,
        detail=detail, generate_rationales=generate, verify=verify, settings=settings,
    )
