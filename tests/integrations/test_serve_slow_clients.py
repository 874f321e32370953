"""Idle and slow clients on a real uvicorn server (127.0.0.1, bounded sockets): idle connections
neither block requests nor stay open, a trickled body times out without holding an admission slot,
connections over the limit get the JSON error shape, and leaving mid-body or a shutdown with a
stalled body logs no traceback."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import pytest

from server_process import call

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from meteora_edge.integrations.http_connections import guarded_protocol  # noqa: E402
from meteora_edge.integrations.http_server import ServerLimits, create_app  # noqa: E402


class QuickService:
    def select(self, body: bytes, check=None) -> dict:
        return {"ok": True}

    def health(self) -> dict:
        return {"status": "ok"}


LIMITS = ServerLimits(workers=1, queue=1, max_body_bytes=4096, header_timeout=1.0, body_timeout=1.0,
                      keep_alive=1.0, max_connections=8)


class Server:
    """The app under uvicorn with the guarded protocol, in a thread; stops itself."""

    def __init__(self, limits: ServerLimits = LIMITS, shutdown_timeout: int = 5) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(create_app(QuickService(), limits=limits), log_level="info", lifespan="off",
                                timeout_keep_alive=limits.keep_alive, timeout_graceful_shutdown=shutdown_timeout,
                                http=guarded_protocol(header_timeout=limits.header_timeout,
                                                      max_connections=limits.max_connections))
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    def connect(self) -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        return conn

    def stop(self) -> float:
        started = time.monotonic()
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()
        return time.monotonic() - started


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.stop()


def _read_all(conn: socket.socket, limit: float = 5) -> bytes:
    conn.settimeout(limit)
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return data


def _answer(raw: bytes) -> tuple[int, dict[str, str], dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)


def _post_head(length: int) -> bytes:
    return (f"POST /v1/select HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def test_idle_connections_do_not_block_requests_and_are_closed(server):
    idle = [server.connect() for _ in range(6)]  # the limit is 8; requests still get through
    try:
        assert call("127.0.0.1", server.port, "POST", "/v1/select", {"q": 1}) == (200, {"ok": True})
        partial = server.connect()
        partial.sendall(b"POST /v1/select HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
        started = time.monotonic()
        for conn in idle:
            assert _read_all(conn) == b""  # closed by the server after --header-timeout
        assert time.monotonic() - started < 4
        status, _, answer = _answer(_read_all(partial))
        assert status == 408 and "the request headers did not arrive within 1 seconds" in answer["error"]
        partial.close()
    finally:
        for conn in idle:
            conn.close()


def test_trickled_bodies_time_out_and_hold_no_admission_slot(server):
    slow = [server.connect() for _ in range(3)]  # more than --workers 1 + --queue 1
    try:
        for conn in slow:
            conn.sendall(_post_head(100) + b'{"q": ')
        time.sleep(0.3)
        assert call("127.0.0.1", server.port, "POST", "/v1/select", {"q": 1}) == (200, {"ok": True})
        for conn in slow:
            status, headers, answer = _answer(_read_all(conn))
            assert status == 408 and headers["connection"] == "close"
            assert answer == {"error": "the body did not arrive within 1 seconds (--body-timeout); send it at once"}
    finally:
        for conn in slow:
            conn.close()


def test_connections_over_the_limit_get_a_json_503_with_retry_after():
    srv = Server(ServerLimits(workers=1, queue=1, max_connections=2, header_timeout=5.0))
    held = [srv.connect() for _ in range(2)]
    try:
        time.sleep(0.2)
        extra = srv.connect()
        body = b'{"q": 1}'
        extra.sendall(_post_head(len(body)) + body)
        status, headers, answer = _answer(_read_all(extra))
        extra.close()
        assert status == 503 and headers["retry-after"] == "1" and headers["content-type"] == "application/json"
        assert answer == {"error": "busy: the server holds its limit of 2 connections (--max-connections); retry later"}
    finally:
        for conn in held:
            conn.close()
        srv.stop()
    # once they are gone, requests are answered again
    srv = Server(ServerLimits(workers=1, queue=1, max_connections=2))
    try:
        assert call("127.0.0.1", srv.port, "POST", "/v1/select", {"q": 1}) == (200, {"ok": True})
    finally:
        srv.stop()


def test_a_client_leaving_mid_body_logs_no_traceback(server, caplog):
    caplog.set_level(logging.INFO)
    for _ in range(3):
        conn = server.connect()
        conn.sendall(_post_head(100) + b'{"q": ')
        time.sleep(0.1)
        conn.close()
    time.sleep(0.3)
    assert call("127.0.0.1", server.port, "POST", "/v1/select", {"q": 1}) == (200, {"ok": True})
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in caplog.records if "disconnected" in r.getMessage()] == [
        "a client disconnected before its body arrived"] * 3


def test_a_shutdown_with_stalled_bodies_is_quick_and_logs_no_traceback(caplog):
    caplog.set_level(logging.INFO)
    srv = Server(ServerLimits(workers=1, queue=1, body_timeout=30.0), shutdown_timeout=10)
    stalled = [srv.connect() for _ in range(3)]
    for conn in stalled:
        conn.sendall(_post_head(100) + b'{"q": ')
    time.sleep(0.3)
    assert srv.stop() < 3  # not the 10-second graceful timeout, no cancelled task
    for conn in stalled:
        assert _read_all(conn) == b""
        conn.close()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.parametrize("kwargs, message", [
    ({"header_timeout": 0}, "header_timeout must be a number of seconds in (0, 3600], got 0"),
    ({"body_timeout": float("nan")}, "body_timeout must be a number of seconds in (0, 3600], got nan"),
    ({"keep_alive": True}, "keep_alive must be a number of seconds in (0, 3600], got True"),
    ({"max_connections": 0}, "max_connections must be a whole number >= 1, got 0"),
])
def test_bad_connection_limits_are_refused_by_name(kwargs, message):
    from meteora_edge.errors import InputError

    with pytest.raises(InputError) as caught:
        ServerLimits(**kwargs)
    assert str(caught.value) == message
