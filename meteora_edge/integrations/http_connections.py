"""The HTTP server's connections: uvicorn's h11 protocol with deadlines and a JSON connection limit.

uvicorn times out a connection only once it has answered a request on it (``timeout_keep_alive``),
and its ``limit_concurrency`` answers with a plain-text 503 and counts idle connections. This
protocol, handed to uvicorn as its ``http`` class, adds:

* a header deadline: a connection that has not sent a whole request line and headers within
  ``header_timeout`` seconds of opening (or of its last answer) is closed, with a JSON 408 when it
  had sent part of them;
* a connection limit: a connection beyond ``max_connections`` is answered ``{"error": …}`` with
  503 and ``Retry-After`` (its first request is read, then the connection is closed);
* a quiet shutdown: on SIGTERM a request still sending its body is dropped at once instead of
  holding the shutdown until its timeout and being cancelled with a logged traceback;
* JSON for malformed HTTP: what h11 cannot parse (a bad request line or header, a bad
  ``Content-Length`` or chunk, a request line and headers still incomplete after 16 KiB) is
  answered ``{"error": "malformed HTTP request: …"}`` with h11's status (400, or 431 for headers
  too large) and the connection closed, instead of uvicorn's plain-text 400. Nothing can be
  answered when the client has already gone, or when the error comes in a pipelined request
  while the previous answer is being written (the connection is closed then); a client speaking
  TLS or HTTP/2 to this plain HTTP/1.1 port gets the JSON 400 but cannot read it.

The body deadline and the count of admitted requests live in the application
(:func:`~meteora_edge.integrations.http_server.create_app`): only a request whose body has
arrived takes a worker or a queue place.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["guarded_protocol", "raw_json_response"]

logger = logging.getLogger(__name__)


def _error_body(message: str) -> bytes:
    return (json.dumps({"error": message}) + "\n").encode()


def raw_json_response(status: int, reason: str, message: str) -> bytes:
    """A whole ``Connection: close`` HTTP/1.1 response with ``{"error": message}``, as bytes."""
    body = _error_body(message)
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return (head + "connection: close\r\n\r\n").encode() + body


def _overloaded_app(max_connections: int) -> Any:
    body = _error_body(f"busy: the server holds its limit of {max_connections} connections (--max-connections); "
                       "retry later")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close"), (b"retry-after", b"1")]

    async def overloaded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return overloaded


def _malformed(exc: BaseException | None) -> bytes:
    status = getattr(exc, "error_status_hint", 400)
    status = status if status in (400, 413, 414, 431) else 400
    detail = re.sub(r"bytearray\(b(['\"])(.*?)\1\)", r"'\2'", " ".join(str(exc or "").split()))[:200]
    fix = ("send the request line and headers in at most 16 KiB" if status == 431 else
           "send one HTTP/1.1 request line, then headers, then a body of the length they give")
    return raw_json_response(status, HTTPStatus(status).phrase,
                             f"malformed HTTP request: {detail or 'it could not be parsed'}; {fix}")


def guarded_protocol(*, header_timeout: float, max_connections: int,
                     wrap: Callable[[Any], Any] | None = None) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header deadline, a JSON connection limit, JSON for malformed
    HTTP and a quiet shutdown.

    Args:
        header_timeout: seconds a connection has to send a request's line and headers.
        max_connections: connections served at once; more are answered 503 and closed.
        wrap: middleware the 503 answer of the connection limit goes through too (request ids, the access log).

    Returns:
        A protocol class for ``uvicorn.Config(http=...)``.
    """
    overloaded = _overloaded_app(max_connections)
    if wrap is not None:
        overloaded = wrap(overloaded)
    late = raw_json_response(408, "Request Timeout", f"the request headers did not arrive within {header_timeout:g} "
                             "seconds (--header-timeout); send the request at once")

    class GuardedProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _parse_error: BaseException | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                self.app = overloaded
            self._arm()
            next_event = self.conn.next_event

            def remembering_next_event() -> Any:  # uvicorn drops h11's reason; keep it for the answer
                try:
                    return next_event()
                except h11.RemoteProtocolError as exc:
                    self._parse_error = exc
                    raise

            self.conn.next_event = remembering_next_event  # type: ignore[method-assign]

        def send_400_response(self, msg: str) -> None:
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True  # the application reads a disconnect and answers nobody
                cycle.message_event.set()
                if cycle.response_started:  # half an answer is on the wire: nothing more can be said
                    self.transport.close()
                    return
            logger.info("malformed HTTP request from %s: %s", self.client, self._parse_error)
            self.transport.write(_malformed(self._parse_error))
            self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's headers have the same deadline

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
            if not waiting or self.transport.is_closing():
                return
            if self.conn.trailing_data[0]:  # part of a request came: say why it is closed
                self.transport.write(late)
            self.transport.close()

        def shutdown(self) -> None:
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete and cycle.more_body:
                cycle.disconnected = True  # the application reads a disconnect and answers nobody
                cycle.message_event.set()
                self.transport.close()
                return
            super().shutdown()

    return GuardedProtocol
