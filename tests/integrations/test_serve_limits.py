"""The HTTP app's concurrency: selections run in parallel up to --workers, wait up to --queue, and
more are refused with 503 — on a real uvicorn server with a service that blocks until released."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from server_process import call

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from meteora_edge.errors import ModelError  # noqa: E402
from meteora_edge.integrations.http_server import ServerLimits, create_app  # noqa: E402


class BlockingService:
    """Answers a select once ``release`` is set; counts how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0

    def select(self, body: bytes, check=None) -> dict:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            if b"fail" in body:
                raise ModelError("the model failed: context overflow")
            if b"crash" in body:
                raise RuntimeError("unexpected\nsecond line")
            assert self.release.wait(20)
            return {"ok": True}
        finally:
            with self.lock:
                self.running -= 1

    def health(self) -> dict:
        return {"status": "ok"}


@pytest.fixture
def app_server():
    service = BlockingService()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = create_app(service, limits=ServerLimits(workers=2, queue=1, max_body_bytes=4096))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield service, sock.getsockname()[1]
    service.release.set()
    server.should_exit = True
    thread.join(10)
    sock.close()


def test_workers_run_in_parallel_and_a_full_queue_is_refused_with_503(app_server):
    service, port = app_server
    with ThreadPoolExecutor(4) as pool:
        first = [pool.submit(call, "127.0.0.1", port, "POST", "/v1/select", {"n": i}) for i in range(3)]
        deadline = time.monotonic() + 10
        while service.running < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the third request is waiting for a worker now
        assert service.running == 2  # --workers 2: two run at once, the third waits (--queue 1)
        status, answer = call("127.0.0.1", port, "POST", "/v1/select", {"n": 3})
        assert status == 503 and "busy: 3 requests are running or waiting" in answer["error"]
        assert call("127.0.0.1", port, "GET", "/v1/health")[0] == 200  # health is never queued
        service.release.set()
        assert [f.result() for f in first] == [(200, {"ok": True})] * 3
    assert service.most == 2
    assert call("127.0.0.1", port, "POST", "/v1/select", {"n": 4}) == (200, {"ok": True})


def test_model_errors_are_500_with_one_line_and_never_a_traceback(app_server):
    _, port = app_server
    assert call("127.0.0.1", port, "POST", "/v1/select", {"fail": 1}) == (
        500, {"error": "the model failed: context overflow"})
    status, answer = call("127.0.0.1", port, "POST", "/v1/select", {"crash": 1})
    assert status == 500 and answer == {
        "error": "internal error (RuntimeError: unexpected second line); see the server log"}


def _exchange(port: int, body: dict) -> tuple[int, str | None, dict]:
    """One POST on its own connection: (status, Retry-After, JSON); a dropped connection raises."""
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/v1/select", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("Retry-After"), json.loads(response.read())
    finally:
        conn.close()


@pytest.fixture
def default_server():
    """The blocking service behind the server's own configuration and default limits."""
    from meteora_edge.integrations.http_server import server_config

    service, limits = BlockingService(), ServerLimits()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(server_config(create_app(service, limits=limits), limits))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield service, sock.getsockname()[1], limits
    service.release.set()
    server.should_exit = True
    thread.join(10)
    sock.close()


def _wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition()


def test_twenty_concurrent_requests_with_the_defaults_are_all_queued_and_answered(default_server):
    service, port, limits = default_server
    assert (limits.workers, limits.queue) == (2, 32)
    with ThreadPoolExecutor(20) as pool:
        futures = [pool.submit(_exchange, port, {"n": i}) for i in range(20)]
        _wait_for(lambda: service.running == 2)
        time.sleep(0.3)  # every request has arrived and waits: none was refused
        assert not any(f.done() for f in futures)
        service.release.set()
        assert [f.result() for f in futures] == [(200, None, {"ok": True})] * 20
    assert service.most == 2


def test_a_burst_of_fifty_gets_only_200_or_503_with_retry_after(default_server):
    service, port, limits = default_server
    with ThreadPoolExecutor(50) as pool:
        futures = [pool.submit(_exchange, port, {"n": i}) for i in range(50)]
        _wait_for(lambda: sum(f.done() for f in futures) == 50 - limits.workers - limits.queue)
        service.release.set()
        answers = [f.result() for f in futures]  # a dropped connection would raise here
    ok = [a for a in answers if a[0] == 200]
    busy = [a for a in answers if a[0] == 503]
    assert len(ok) == limits.workers + limits.queue and len(ok) + len(busy) == 50
    assert all(retry == "1" and answer["error"].startswith("busy: ") for _, retry, answer in busy)
