"""Test helpers for `meteora-edge serve`: start the real server in a child process, call it over
HTTP with the standard library's client, and run the CLI for the same input."""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from repo_paths import ROOT

STARTUP_SECONDS = 60


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "meteora_edge", *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("METEORA_EDGE_BUNDLE", None)
    env.pop("METEORA_EDGE_TOKEN", None)
    return env


class ServerProcess:
    """`meteora-edge [options] serve --port 0 …` in a child process; ``url`` once it listens."""

    def __init__(self, *args: str, options: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(cli_command(*options, "serve", "--port", "0", *args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=ROOT, env=child_env())
        self.url = self._wait_for_url()
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname, parts.port

    def _wait_for_url(self) -> str:
        chooser = selectors.DefaultSelector()
        chooser.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + STARTUP_SECONDS
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if not chooser.select(timeout=0.5):
                if self.proc.poll() is not None:
                    break
                continue
            piece = os.read(self.proc.stdout.fileno(), 4096)
            if not piece:
                break
            line += piece
        text = line.decode()
        if not text.startswith("listening on "):
            self.stop()
            raise AssertionError(f"server did not start: stdout {text!r}, stderr {self.stderr_text()!r}")
        return text.split()[-1]

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")

    def signal(self, signum: int = signal.SIGTERM, timeout: float = 10) -> int:
        """Send a signal; the exit code once the process ended (fails after ``timeout`` seconds)."""
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        return call(self.host, self.port, method, path, body, **kwargs)


def call(
    host: str,
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: Mapping[str, str] | None = None,
    raw: bytes | Iterable[bytes] | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    """One request; (status, parsed JSON body). ``raw`` sends bytes as they are (an iterable: chunked)."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        sent_headers = {"Content-Type": content_type, **(headers or {})}
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        chunked = payload is not None and not isinstance(payload, (bytes, bytearray))
        conn.request(method, path, body=payload, headers=sent_headers, encode_chunked=chunked)
        response = conn.getresponse()
        data = response.read()
        assert response.getheader("Content-Type", "").startswith("application/json"), (response.status, data[:200])
        return response.status, json.loads(data)
    finally:
        conn.close()


def without_timings(data: Any) -> Any:
    """The JSON without timings (each phase's ``ms``, the trace's ``total_ms``): the only fields that
    differ from run to run."""
    if isinstance(data, dict):
        return {k: without_timings(v) for k, v in data.items() if k not in ("ms", "total_ms")}
    if isinstance(data, list):
        return [without_timings(v) for v in data]
    return data


def cli_json(*args: str) -> dict[str, Any]:
    """`meteora-edge select … --compact` in a child process, parsed."""
    proc = subprocess.run(cli_command("select", *args, "--compact"), capture_output=True, text=True, cwd=ROOT,
                          env=child_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def sigterm_under_load(*args: str, requests: int = 3, chunks: int = 1500, words: int = 400,
                       shutdown_timeout: int = 10, after: float = 1.5) -> dict[str, Any]:
    """SIGTERM a server (hashing encoder) while ``requests`` selections of ``chunks`` chunks run: ``after``
    seconds after every client has sent its whole body.

    Returns:
        ``exit_s`` (signal to exit), ``code``, ``answers`` (per client: (status, body is one JSON
        object with ``passages`` or ``error``)), ``tracebacks`` in its log, ``stopped`` (its log lines
        for stopped requests) and ``log``.
    """
    import random
    import threading

    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(4000)] + "party may terminate agreement notice fees".split()
    body = json.dumps({"query": "who may terminate the agreement?",
                       "chunks": [" ".join(rng.choices(vocabulary, k=words)) for _ in range(chunks)]}).encode()
    srv = ServerProcess("--shutdown-timeout", str(shutdown_timeout), "--max-body-mb", "64", *args)
    answers: list[tuple[int, bool]] = []
    sent = threading.Semaphore(0)

    def client() -> None:
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=300)
        try:
            try:
                conn.request("POST", "/v1/select", body=body, headers={"Content-Type": "application/json"})
            finally:
                sent.release()
            response = conn.getresponse()
            raw = response.read()
            try:
                data = json.loads(raw)
                ok = response.getheader("Content-Type", "").startswith("application/json") and isinstance(data, dict) \
                    and (bool(data.get("passages")) or list(data) == ["error"])
            except ValueError:
                ok = False
            answers.append((response.status, ok))
        except OSError:
            answers.append((0, False))  # no answer at all
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(requests)]
    for thread in threads:
        thread.start()
    for _ in threads:
        sent.acquire(timeout=120)
    time.sleep(after)
    signalled = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        code = srv.proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        code = srv.proc.wait()
    exit_s = time.monotonic() - signalled
    for thread in threads:
        thread.join(timeout=60)
    log = srv.stderr_text()
    srv.stop()
    return {"exit_s": exit_s, "code": code, "answers": sorted(answers), "tracebacks": log.count("Traceback"),
            "stopped": [line for line in log.splitlines() if " stopped (" in line], "log": log}
