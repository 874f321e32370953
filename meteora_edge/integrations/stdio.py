"""``meteora-edge serve --stdio``: JSON lines over pipes, for apps that spawn a child process.

One request per line on stdin, one JSON object per line on stdout, in the same order. A line
is either framed as JSON-RPC 2.0 or a bare ``/v1/select`` body:

* ``{"jsonrpc": "2.0", "id": 7, "method": "select", "params": {<body>}}`` is answered
  ``{"jsonrpc": "2.0", "id": 7, "result": {<select's JSON>}}`` or ``{"jsonrpc": "2.0", "id": 7,
  "error": {"code": -32602, "message": "<one line>"}}``. A request without ``id`` (a
  notification) is neither run nor answered, as JSON-RPC says; a batch (a list) is refused.
* A bare body may carry ``"id"`` (a string or an integer) that its answer echoes first:
  ``{"id": 7, "format": "meteora-edge.selection", …}`` or ``{"id": 7, "error": "<one line>"}``.
  Without ``id`` the answer is ``select``'s JSON or ``{"error": …}`` alone.

A line that is not JSON at all is answered in the JSON-RPC shape with ``"id": null`` when it
mentions ``"jsonrpc"``, else with ``{"error": …}``. The loop goes on after every error; blank
lines are passed over; end of input ends the loop. Requests are answered one at a time; logs
and notes go to stderr only.

Example:
    >>> import io
    >>> from meteora_edge.integrations.service import SelectService
    >>> out = io.BytesIO()
    >>> lines = (b'{"id": "a", "query": "x", "chunks": ["x y"]}\\nnot json\\n'
    ...          b'{"jsonrpc": "2.0", "id": 2, "method": "select", "params": {"chunks": []}}\\n')
    >>> serve_stdio(SelectService(), io.BytesIO(lines), out)
    3
    >>> [line[:28] for line in out.getvalue().decode().splitlines()]
    ['{"id": "a", "format": "meteo', '{"error": "malformed JSON: E', '{"jsonrpc": "2.0", "id": 2, ']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, BinaryIO

from ..errors import Cancelled, ConfigError, InputError, MeteoraError
from ..pipeline.deadline import Deadline
from .select_request import read_json_body
from .service import SelectService, json_line, one_line

__all__ = ["serve_stdio", "PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS",
           "INTERNAL_ERROR", "SERVER_ERROR"]

logger = logging.getLogger(__name__)

_READ = 1 << 16
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
SERVER_ERROR = -32000  # a model or an index failed while answering a good request, or it ran past its deadline
METHODS = ("select",)
_NO_ID = object()  # a bare request without "id", or a JSON-RPC notification


class _Failed(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _select(service: SelectService, body: Mapping[str, Any], timeout: float | None) -> dict[str, Any]:
    """select's JSON for one body, or :class:`_Failed` with the JSON-RPC code and one line."""
    deadline = Deadline(timeout=timeout, name="--request-timeout")
    try:
        deadline.start()  # requests are answered one at a time: none waits for a worker
        return service.select(body, check=deadline)
    except Cancelled as exc:
        logger.warning("request stopped (%s): %s", exc.reason, one_line(exc))
        raise _Failed(SERVER_ERROR, one_line(exc)) from None
    except (InputError, ConfigError) as exc:
        raise _Failed(INVALID_PARAMS, one_line(exc)) from None
    except MeteoraError as exc:
        raise _Failed(SERVER_ERROR, one_line(exc)) from None
    except MemoryError:
        raise _Failed(SERVER_ERROR, "out of memory; send a smaller request") from None
    except Exception as exc:  # the loop must go on; the full error goes to the log
        logger.exception("unexpected error while answering a line")
        raise _Failed(INTERNAL_ERROR, f"internal error ({type(exc).__name__}: {one_line(exc)[:200]})") from None


def _check_id(value: Any, *, allow_null: bool) -> Any:
    if (value is None and allow_null) or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _Failed(INVALID_REQUEST, f"'id' must be a string or an integer, got {type(value).__name__}")


def _rpc(service: SelectService, data: Mapping[str, Any], timeout: float | None) -> dict[str, Any] | None:
    """The answer to one JSON-RPC 2.0 request (None for a notification)."""
    request_id = data.get("id", _NO_ID)
    if request_id is not _NO_ID:
        try:
            request_id = _check_id(request_id, allow_null=True)
        except _Failed as exc:
            return _rpc_error(None, exc.code, str(exc))  # JSON-RPC: the id could not be read
    try:
        if data.get("jsonrpc") != "2.0":
            raise _Failed(INVALID_REQUEST, f"'jsonrpc' must be \"2.0\", got {data.get('jsonrpc')!r}")
        unknown = sorted(set(data) - {"jsonrpc", "id", "method", "params"})
        if unknown:
            raise _Failed(INVALID_REQUEST, f"unknown member(s) {', '.join(map(repr, unknown))} of a JSON-RPC request; "
                                           "it takes jsonrpc, id, method and params")
        if data.get("method") not in METHODS:
            raise _Failed(METHOD_NOT_FOUND, f"no method {data.get('method')!r}; this server has {', '.join(METHODS)}")
        params = data.get("params", {})
        if not isinstance(params, Mapping):
            raise _Failed(INVALID_PARAMS, f"'params' must be the request object, got {type(params).__name__}")
        if request_id is _NO_ID:
            return None  # a notification: JSON-RPC answers nothing, and a selection nobody reads is not run
        return {"jsonrpc": "2.0", "id": request_id, "result": _select(service, params, timeout)}
    except _Failed as exc:
        if request_id is _NO_ID:
            return None
        return _rpc_error(request_id, exc.code, str(exc))


def _rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _bare(service: SelectService, data: Mapping[str, Any], timeout: float | None) -> dict[str, Any]:
    """The answer to one bare body, with its ``id`` first when it has one."""
    body = dict(data)
    request_id = body.pop("id", _NO_ID)
    echo: dict[str, Any] = {}
    try:
        if request_id is not _NO_ID:
            echo = {"id": _check_id(request_id, allow_null=False)}
        return {**echo, **_select(service, body, timeout)}
    except _Failed as exc:
        return {**echo, "error": str(exc)}


def _answer(service: SelectService, line: bytes, timeout: float | None) -> dict[str, Any] | None:
    try:
        data = read_json_body(line)
    except InputError as exc:
        if b'"jsonrpc"' in line:
            return _rpc_error(None, PARSE_ERROR, one_line(exc))
        return {"error": one_line(exc)}
    if isinstance(data, Mapping) and "jsonrpc" in data:
        return _rpc(service, data, timeout)
    if isinstance(data, list) and any(isinstance(item, Mapping) and "jsonrpc" in item for item in data):
        return _rpc_error(None, INVALID_REQUEST, "batches are not supported; send one request a line")
    if not isinstance(data, Mapping):
        return {"error": f"the body must be a JSON object, got {type(data).__name__}"}
    return _bare(service, data, timeout)


def _skip_rest_of_line(stdin: BinaryIO) -> None:
    while True:
        piece = stdin.readline(_READ)
        if not piece or piece.endswith(b"\n"):
            return


def serve_stdio(service: SelectService, stdin: BinaryIO, stdout: BinaryIO, *, max_line_bytes: int = 16 * 2**20,
                request_timeout: float | None = None) -> int:
    """Answer request lines until end of input.

    Args:
        service: the loaded models and indexes.
        stdin: binary input, one JSON request per line.
        stdout: binary output; each answer is written and flushed as one line.
        max_line_bytes: a longer line is skipped and answered with an error (its id cannot be read).
        request_timeout: seconds each request's work may take; then it stops at its next check and the
            answer is an error (code -32000). None: no deadline.

    Returns:
        The number of answers written.
    """
    answered = 0
    while True:
        line = stdin.readline(max_line_bytes + 1)
        if not line:
            return answered
        data: dict[str, Any] | None
        if len(line) > max_line_bytes:
            head = line[:256]
            if not line.endswith(b"\n"):
                _skip_rest_of_line(stdin)
            message = (f"the line has more than {max_line_bytes} bytes, the limit (--max-body-mb); "
                       "send a smaller request")
            data = _rpc_error(None, INVALID_REQUEST, message) if b'"jsonrpc"' in head else {"error": message}
        elif not line.strip():
            continue
        else:
            data = _answer(service, line, request_timeout)
        if data is None:
            continue
        stdout.write(json_line(data))
        stdout.flush()
        answered += 1
