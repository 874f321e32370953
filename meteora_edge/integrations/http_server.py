"""``meteora-edge serve``'s HTTP API on Starlette + uvicorn (extra ``[serve]``).

Endpoints (JSON in, JSON out; every error is ``{"error": "<one line>"}``):

* ``POST /v1/select`` — a request body (see :mod:`.select_request`) → ``select``'s JSON object;
* ``POST /v1/rerank``, ``/rerank``, ``/v2/rerank`` — the Jina / Cohere rerank request, answered by the
  same selection (see :mod:`.rerank_api`);
* ``GET /v1/index[?name=NAME]`` — ``index info`` of a served index (the first by default);
* ``GET /v1/health`` — versions, the bundle's identity, the loaded models, the indexes and limits;
* ``GET /v1/models`` — the loaded models by role and the indexes, by name;
* ``GET /openapi.json`` — the OpenAPI 3.1 document (see :mod:`.api_schema`);
* ``GET /docs`` — that document as a browsable page, and ``GET /`` — links (see :mod:`.api_page`).

Every answer carries ``X-Request-Id`` and, with ``-v``, is logged in one line; CORS is off unless
origins are given (see :mod:`.http_middleware`).

Guards, in order: the token (``Authorization: Bearer``, compared in constant time) when one is
set; on a loopback bind, a ``Host`` header naming the loopback (so a web page cannot reach the
server through DNS rebinding); ``Content-Type: application/json`` on POST (so a browser cannot
send a cross-site form post); a body of at most ``max_body_bytes`` (more → 413) that arrives
within ``body_timeout`` seconds (else 408); then at most ``workers + queue`` admitted selections
at once (more → 503 with ``Retry-After``). Selections run in a thread pool of ``workers``
threads over the shared models, each under a deadline of ``request_timeout`` seconds from the
moment its body arrived: the work checks it between phases and batches and stops there (504;
503 when it never got a worker in that time). After a SIGINT/SIGTERM, running selections get
``shutdown_timeout`` seconds less one to finish; then the server's stop is set, which the same
checks see: what still runs ends with a JSON 503 (one log line each), so the process exits
within ``shutdown_timeout`` and a moment, never waiting for the work to end on its own. Connections have their own deadlines and limit (see
:mod:`.http_connections`): headers within ``header_timeout``, ``keep_alive`` seconds idle
between requests, at most ``max_connections`` at once (more → a JSON 503).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import logging
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from ..errors import Cancelled, InputError, MeteoraError, MissingExtraError
from ..pipeline.deadline import Deadline
from .service import SelectService, error_status, json_line, one_line

try:
    import anyio
    import uvicorn
    from starlette.applications import Starlette
    from starlette.datastructures import Headers
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(exc.name or "starlette", "serve") from exc

from .api_page import page_routes
from .api_schema import openapi_document, package_version
from .http_connections import guarded_protocol
from .http_shutdown import StoppingServer
from .http_middleware import JsonCORS, RequestLog, check_origins
from .rerank_api import RERANK_PATHS, rerank, rerank_model_name

__all__ = ["ServerLimits", "create_app", "check_bind", "is_loopback", "models_listing", "server_config", "serve_http"]

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
MIN_TOKEN_CHARS = 16


class ServerLimits:
    """How much the server takes at once, and how long it waits for a client.

    Args:
        workers: selections that run at once.
        queue: admitted selections that may wait for a worker.
        max_body_bytes: the largest request body.
        header_timeout: seconds a connection has to send a request's line and headers.
        body_timeout: seconds a request has to send its whole body once its headers came.
        keep_alive: seconds an idle connection stays open after an answer.
        max_connections: open connections at once; more are answered 503.
        request_timeout: seconds a selection may take from the moment its body arrived, waiting
            for a worker included (None: no deadline).

    Raises:
        InputError: a value that is not a whole number (counts) or a positive number (seconds).
    """

    def __init__(self, *, workers: int = 2, queue: int = 32, max_body_bytes: int = 16 * 2**20,
                 header_timeout: float = 10.0, body_timeout: float = 30.0, keep_alive: float = 5.0,
                 max_connections: int = 256, request_timeout: float | None = 60.0) -> None:
        for name, value in (("workers", workers), ("queue", queue), ("max_body_bytes", max_body_bytes),
                            ("max_connections", max_connections)):
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "queue" else 1):
                raise InputError(f"{name} must be a whole number >= {0 if name == 'queue' else 1}, got {value!r}")
        timeouts = [("header_timeout", header_timeout), ("body_timeout", body_timeout), ("keep_alive", keep_alive)]
        for name, value in timeouts + ([("request_timeout", request_timeout)] if request_timeout is not None else []):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 3600:
                raise InputError(f"{name} must be a number of seconds in (0, 3600], got {value!r}")
        self.workers, self.queue, self.max_body_bytes = workers, queue, max_body_bytes
        self.header_timeout, self.body_timeout, self.keep_alive = header_timeout, body_timeout, keep_alive
        self.max_connections, self.request_timeout = max_connections, request_timeout

    def to_dict(self) -> dict[str, int | float | None]:
        return {"workers": self.workers, "queue": self.queue, "max_body_bytes": self.max_body_bytes,
                "header_timeout": self.header_timeout, "body_timeout": self.body_timeout,
                "keep_alive": self.keep_alive, "max_connections": self.max_connections,
                "request_timeout": self.request_timeout}


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a bind that would expose the server without a token, or a weak token.

    Raises:
        InputError: a non-loopback host without a token, or a token under 16 characters.
    """
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InputError(f"--token must have at least {MIN_TOKEN_CHARS} characters, got {len(token)}; "
                         "e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))'")
    if not is_loopback(host) and token is None:
        raise InputError(f"refusing to listen on {host}, which is not a loopback address, without --token: anyone "
                         "who can reach it could use the server; give --token SECRET (clients then send "
                         "'Authorization: Bearer SECRET') or keep the default --host 127.0.0.1")


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json_line(data), status_code=status, headers=headers, media_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json({"error": message}, status, headers)


def _request_host(headers: Headers) -> str:
    host = headers.get("host", "")
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.rsplit(":", 1)[0].lower()


class _Guard:
    """ASGI middleware: the bearer token and, on a loopback bind, the Host header."""

    def __init__(self, app: Any, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.digest = hashlib.sha256(token.encode()).digest() if token is not None else None
        self.loopback = loopback

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(Headers(scope=scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: Headers) -> Response | None:
        if self.digest is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            ok = scheme.lower() == "bearer" and hmac.compare_digest(
                hashlib.sha256(given.strip().encode()).digest(), self.digest)
            if not ok:
                return _error(401, "missing or wrong token; send 'Authorization: Bearer <token>'",
                              {"WWW-Authenticate": "Bearer"})
        if self.loopback and _request_host(headers) not in LOOPBACK_NAMES:
            return _error(421, "this server answers only requests addressed to localhost or 127.0.0.1")
        return None


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise _Refused(413, f"the body has {length} bytes, over the server's limit of {limit} bytes (--max-body-mb)")
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _Refused(413, f"the body has more than {limit} bytes, the server's limit (--max-body-mb)")
        parts.append(part)
    return b"".join(parts)


def models_listing(service: SelectService) -> dict[str, Any]:
    """What ``GET /v1/models`` answers: the loaded models by role and the served indexes, by name (no paths).

    Returns:
        ``{"object": "list", "data": [{"id", "object": "model", "role", …}], "indexes": [{"name", "chunks",
        "generation"}]}`` — roles ``encoder``, ``cross_encoder``, ``llm`` (with the request keys it serves)
        ``tokenizer`` (what ``t_max`` counts in) and ``rerank`` (the name the rerank routes answer to, with
        those ``routes``).
    """
    health = service.health()
    models = health.get("models") or {}
    data: list[dict[str, Any]] = []
    for role in ("encoder", "cross_encoder"):
        if models.get(role):
            data.append({"id": models[role], "object": "model", "role": role})
    llm = models.get("llm")
    if llm:
        serves = [key for key, attr in (("generate_rationales", "generator"), ("verify", "verifier"))
                  if getattr(service, attr, None) is not None]
        source = str(llm.get("source") or "gguf").replace("\\", "/").rsplit("/", 1)[-1]
        data.append({"id": source, "object": "model", "role": "llm", "serves": serves,
                     "chat_format": llm.get("chat_format"), "context_size": llm.get("context_size")})
    if models.get("tokenizer"):
        data.append({"id": models["tokenizer"], "object": "model", "role": "tokenizer"})
    data.append({"id": rerank_model_name(getattr(service, "bundle", None)), "object": "model", "role": "rerank",
                 "routes": list(RERANK_PATHS)})
    indexes = [{"name": i["name"], "chunks": i["chunks"], "generation": i["generation"]}
               for i in health.get("indexes", [])]
    return {"object": "list", "data": data, "indexes": indexes}


def create_app(service: SelectService, *, limits: ServerLimits | None = None, token: str | None = None,
               loopback: bool = True, cors_origins: tuple[str, ...] | list[str] = (),
               stop: threading.Event | None = None) -> Starlette:
    """The ASGI application over one :class:`SelectService`.

    Args:
        service: the loaded models and indexes.
        limits: workers, queue and body size (defaults: 2, 32, 16 MiB).
        token: when set, every request must send ``Authorization: Bearer <token>``.
        loopback: the server listens on a loopback address (then ``Host`` must name it).
        cors_origins: web origins allowed to call the server from a browser (none: CORS off).
        stop: set when the server is stopping; running and waiting selections then end with a 503.

    Returns:
        A Starlette application.

    Raises:
        InputError: an origin that is not ``scheme://host[:port]``, ``null`` or ``*`` (with a token only).
    """
    limits = limits or ServerLimits()
    origins = check_origins(cors_origins, token=token)
    document = openapi_document(package_version(), token=token is not None)
    workers = anyio.CapacityLimiter(limits.workers)
    state = {"active": 0}
    answers = {"/v1/select": service.select, **{path: functools.partial(rerank, service) for path in RERANK_PATHS}}
    stop = stop if stop is not None else threading.Event()

    async def run_work(request: Request, work: Callable[..., Any], *args: Any) -> Response:
        """Run ``work(*args, check=deadline)`` on a worker under the request's deadline and the server's stop;
        the JSON answer, or one JSON error (and one log line for a request that was stopped)."""
        deadline = Deadline(timeout=limits.request_timeout, stop=stop, name="--request-timeout")

        def started() -> Any:
            deadline.start()
            return work(*args, check=deadline)

        try:
            data = await anyio.to_thread.run_sync(started, limiter=workers, abandon_on_cancel=True)
        except Cancelled as exc:
            logger.warning("request %s stopped (%s): %s", _request_id(request), exc.reason, one_line(exc))
            return _error(error_status(exc), one_line(exc), {"Retry-After": "1"} if exc.reason != "deadline" else None)
        except anyio.get_cancelled_exc_class():
            # the shutdown timeout passed while this request's work had not reached a check: it is left to
            # stop at its next one (the stop is set) and the client still gets its answer in JSON
            stop.set()
            logger.warning("request %s stopped (shutdown): the shutdown timeout passed", _request_id(request))
            return _error(503, "the server is shutting down; send the request again once it is back",
                          {"Retry-After": "1", "Connection": "close"})
        except Exception as exc:  # every failure is one line; unexpected ones are logged in full
            return _failure(exc)
        return _json(data)

    async def select(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return _error(415, "send the body as JSON with 'Content-Type: application/json'")
        try:
            with anyio.fail_after(limits.body_timeout):
                body = await _read_body(request, limits.max_body_bytes)
        except _Refused as exc:
            return _error(exc.status, str(exc))
        except TimeoutError:
            return _error(408, f"the body did not arrive within {limits.body_timeout:g} seconds (--body-timeout); "
                               "send it at once", {"Connection": "close"})
        except ClientDisconnect:  # nobody to answer: the client left, or the server is shutting down
            logger.info("a client disconnected before its body arrived")
            return Response(status_code=400)
        if state["active"] >= limits.workers + limits.queue:  # only requests with their body count
            return _error(503, f"busy: {state['active']} requests are running or waiting (--workers "
                               f"{limits.workers}, --queue {limits.queue}); retry later", {"Retry-After": "1"})
        state["active"] += 1
        try:
            return await run_work(request, answers[request.scope["route"].path], body)
        finally:
            state["active"] -= 1

    async def index(request: Request) -> Response:
        name = request.query_params.get("name")
        try:
            data = await anyio.to_thread.run_sync(service.index_info, name, limiter=workers)
        except InputError as exc:
            return _error(404, one_line(exc))
        except Exception as exc:
            return _failure(exc)
        return _json(data)

    async def health(request: Request) -> Response:
        try:
            data = await anyio.to_thread.run_sync(service.health)
        except Exception as exc:
            return _failure(exc)
        return _json({**data, "limits": limits.to_dict()})

    async def models(request: Request) -> Response:
        try:
            data = await anyio.to_thread.run_sync(models_listing, service)
        except Exception as exc:
            return _failure(exc)
        return _json(data)

    async def openapi(request: Request) -> Response:
        return _json(document)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return _error(status, f"{detail}: {request.method} {request.url.path}")

    routes = [Route("/v1/select", select, methods=["POST"]), Route("/v1/index", index, methods=["GET"]),
              Route("/v1/health", health, methods=["GET"]), Route("/v1/models", models, methods=["GET"]),
              Route("/openapi.json", openapi, methods=["GET"]),
              *[Route(path, select, methods=["POST"]) for path in RERANK_PATHS], *page_routes()]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: http_error})
    app.add_middleware(_Guard, token=token, loopback=loopback)
    if origins:  # outside the guard: a browser's preflight carries no token
        app.add_middleware(JsonCORS, allow_origins=origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type", "X-Request-Id"],
                           expose_headers=["X-Request-Id", "Retry-After"], max_age=600)
    app.add_middleware(RequestLog)
    return app


def _request_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("request_id", "-"))


def _failure(exc: Exception) -> Response:
    """One line for a failed request: the library's own message, else a logged internal error."""
    if isinstance(exc, (MeteoraError, MemoryError)):
        return _error(error_status(exc), one_line(exc) if isinstance(exc, MeteoraError) else
                      "out of memory; send a smaller request")
    logger.exception("unexpected error while answering a request")
    return _error(500, f"internal error ({type(exc).__name__}: {one_line(exc)[:200]}); see the server log")


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port "
                         "(0 picks a free one)") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def server_config(app: Any, limits: ServerLimits, *, shutdown_timeout: int = 10) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: the guarded h11 protocol, no access log of its own, no lifespan,
    no WebSocket (an upgrade request is answered as the plain HTTP request it also is, guards and JSON included).

    Args:
        app: the ASGI application (see :func:`create_app`).
        limits: the keep-alive, header deadline and connection limit.
        shutdown_timeout: seconds running requests get to finish after a signal.
    """
    return uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False, ws="none",
                          timeout_graceful_shutdown=shutdown_timeout, timeout_keep_alive=limits.keep_alive,
                          http=guarded_protocol(header_timeout=limits.header_timeout,
                                                max_connections=limits.max_connections, wrap=RequestLog))


def serve_http(
    service: SelectService,
    *,
    host: str = "127.0.0.1",
    port: int = 8731,
    token: str | None = None,
    limits: ServerLimits | None = None,
    shutdown_timeout: int = 10,
    cors_origins: tuple[str, ...] | list[str] = (),
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Listen until SIGINT or SIGTERM, then finish the running requests and return.

    Args:
        service: the loaded models and indexes.
        host, port: where to listen (port 0: a free port, passed to ``on_ready``).
        token: required from clients when set; required to bind a non-loopback host.
        limits: workers, queue and body size.
        shutdown_timeout: seconds running requests get to finish after a signal.
        cors_origins: web origins allowed to call the server from a browser (none: CORS off).
        on_ready: called with the base URL once the socket listens.

    Raises:
        InputError: a non-loopback host without a token, a bad origin, or the port is taken.
    """
    check_bind(host, token)
    limits = limits or ServerLimits()
    stop = threading.Event()
    app = create_app(service, limits=limits, token=token, loopback=is_loopback(host), cors_origins=cors_origins,
                     stop=stop)
    sock = _listening_socket(host, port)
    server = StoppingServer(server_config(app, limits, shutdown_timeout=shutdown_timeout), stop)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if sock.family == socket.AF_INET6 else bound[0]
    if on_ready is not None:
        on_ready(f"http://{shown}:{bound[1]}")
    # uvicorn re-raises a caught SIGINT/SIGTERM through the handler it found once it has shut
    # down; a handler that only notes it makes a signalled shutdown an ordinary return (exit 0).
    in_main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _note_signal) for s in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
    try:
        server.run(sockets=[sock])
    finally:
        if server.timer is not None:
            server.timer.cancel()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


def _note_signal(signum: int, frame: Any) -> None:
    logger.info("received signal %d after shutdown", signum)
