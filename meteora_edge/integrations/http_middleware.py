"""ASGI middleware of the HTTP server: request ids with an access log, and CORS with JSON refusals.

* :class:`RequestLog` (outermost) gives every answer an ``X-Request-Id`` header — the request's
  own when it sent 1–128 visible ASCII characters, else a new random one — and, at INFO level
  on the ``meteora_edge.integrations.http_middleware.access`` logger (``meteora-edge -v serve``),
  one line per request: method, path (no query string), status, milliseconds and the id. Never
  a body, a header value or a token.
* :class:`JsonCORS` is Starlette's ``CORSMiddleware`` for the origins given (none: CORS off, a
  preflight is a 405) whose refused preflights are ``{"error": …}`` like every other answer.

Example:
    >>> check_origins(["http://localhost:5173", "tauri://localhost"], token=None)
    ('http://localhost:5173', 'tauri://localhost')
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from ..errors import InputError
from .service import json_line

__all__ = ["RequestLog", "JsonCORS", "check_origins", "REQUEST_ID_HEADER"]

access_logger = logging.getLogger(f"{__name__}.access")

REQUEST_ID_HEADER = "x-request-id"
_GOOD_ID = re.compile(r"[\x21-\x7e]{1,128}")
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/?#\s]+")


def _request_id(scope: dict[str, Any]) -> str:
    given = Headers(scope=scope).get(REQUEST_ID_HEADER, "")
    return given if _GOOD_ID.fullmatch(given) else uuid.uuid4().hex


class RequestLog:
    """ASGI middleware: ``X-Request-Id`` on every answer and one access-log line per request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        started, status = time.perf_counter(), [500]

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != REQUEST_ID_HEADER.encode()]
                message = {**message, "headers": [*headers, (REQUEST_ID_HEADER.encode(), request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if access_logger.isEnabledFor(logging.INFO):
                path = quote(scope.get("path", ""), safe="/:@!$&'()*+,;=-._~")  # no control characters in the log
                access_logger.info("%s %s %d %.1f ms id=%s", scope.get("method", "?"), path, status[0],
                                   (time.perf_counter() - started) * 1000, request_id)


class JsonCORS(CORSMiddleware):
    """Starlette's CORS middleware whose refused preflights answer ``{"error": …}`` (400)."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code == 200:
            return response
        refused = bytes(response.body).decode().removeprefix("Disallowed CORS ")
        origin = request_headers.get("origin", "")
        body = json_line({"error": f"CORS preflight refused ({refused}) for origin {origin!r}; the server allows "
                                   f"{', '.join(self.allow_origins) or 'no origin'} (--cors-origin)"})
        headers = {k: v for k, v in response.headers.items() if k not in ("content-type", "content-length")}
        return Response(body, status_code=400, headers=headers, media_type="application/json")


def check_origins(origins: Sequence[str], *, token: str | None) -> tuple[str, ...]:
    """The origins CORS allows, checked: ``scheme://host[:port]`` as a browser sends it, ``null`` or ``*``.

    Args:
        origins: the origins to allow (empty: CORS off).
        token: the server's token; ``*`` (every web page) is refused without one.

    Returns:
        The origins, without duplicates, in order.

    Raises:
        InputError: a value with a path or a trailing slash (a browser never sends one, so it
            would never match), or ``*`` without a token.
    """
    checked: list[str] = []
    for origin in (o.strip().lower() for o in origins):  # a browser sends scheme and host in lower case
        if origin == "*" and token is None:
            raise InputError("cors_origins '*' would let every web page the user opens query the server; give the "
                             "app's own origin (e.g. http://localhost:5173), or set a token")
        if origin not in ("*", "null") and not _ORIGIN.fullmatch(origin):
            raise InputError(f"cors_origins holds {origin!r}, which is not an origin: give scheme://host[:port] "
                             "with no path or trailing slash, e.g. http://localhost:5173 or tauri://localhost")
        if origin not in checked:
            checked.append(origin)
    return tuple(checked)
