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
* ``generate_rationales`` / ``verify`` / ``llm_rerank`` — the GGUF roles (the server needs ``--llm``),
  with ``rationale_prompt`` (``"hops"``/``"meteora"``) and ``num_rationales`` for the first;
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
from typing import Any

from ..documents import check_unicode
from ..errors import InputError
from ..fileio import DuplicateKeyError, loads_json
from ..pipeline.request import REQUEST_KEYS, SETTING_KEYS, SelectRequest, request_from_json
from .api_schema import request_json_schema

__all__ = ["SelectRequest", "parse_select_request", "request_json_schema", "REQUEST_KEYS", "SETTING_KEYS"]


def _reject_constant(name: str) -> float:
    raise InputError(f"the body holds {name}, which is not JSON; send numbers only")


def read_json_body(body: bytes | str) -> Any:
    """Parse a request body as strict JSON (no NaN/Infinity, valid Unicode), or raise a one-line InputError."""
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        data = loads_json(text, parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise InputError("the body is not UTF-8 text; send JSON") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError("the JSON is nested too deeply") from None
    except DuplicateKeyError as exc:
        raise InputError(f"the body is ambiguous: {exc}") from None
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


def parse_select_request(body: bytes | str | Mapping[str, Any]) -> SelectRequest:
    """Read and check one request body, with ``select``'s rules and one-line messages
    (:class:`~meteora_edge.pipeline.request.SelectRequest`'s, which name the JSON keys).

    Args:
        body: the raw JSON (bytes or text) or an already parsed object.

    Returns:
        The checked :class:`SelectRequest`.

    Raises:
        InputError: malformed JSON, not an object, an unknown key, a value of the wrong type,
            no query and no rationale, or options that contradict each other.
        ConfigError: a pipeline setting out of range.
    """
    return request_from_json(body if isinstance(body, Mapping) else read_json_body(body))
