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

    def select(self, body: bytes) -> dict:
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
