"""examples/web/index.html in headless Chromium: a page served from an allowed origin fetches
/v1/select across origins and shows the passages; the same page from another origin is refused
by the browser. Skipped without a `chromium` binary (scripts/setup-dev.sh installs it)."""

from __future__ import annotations

import functools
import html
import http.server
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode

import pytest

from server_process import ROOT, ServerProcess

pytest.importorskip("uvicorn")

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary; apt-get install -y chromium "
                                                          "(scripts/setup-dev.sh does) to run the browser test")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def static_site(port: int) -> Iterator[str]:
    """examples/web served on 127.0.0.1:port, quietly, in a thread."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(ROOT / "examples" / "web"))
    site = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        site.shutdown()
        site.server_close()


def page_dom(url: str) -> str:
    """The page's DOM once its scripts and fetches have run (headless Chromium, a throwaway profile)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=15000",
                               "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _body_state(dom: str) -> str:
    found = re.search(r'<body data-state="(\w+)"', dom)
    assert found, dom[:2000]
    return found.group(1)


def test_the_example_page_queries_the_server_from_an_allowed_origin_only(tiny_bundle, tiny_index):
    allowed, other = _free_port(), _free_port()
    srv = ServerProcess("--bundle", str(tiny_bundle), "--index", str(tiny_index),
                        "--cors-origin", f"http://127.0.0.1:{allowed}")
    question = "Who may terminate the agreement?"
    query = urlencode({"server": srv.url, "query": question, "run": "1"})
    try:
        status, direct = srv.call("POST", "/v1/select", {"query": question, "t_max": 300})  # what the page sends
        assert status == 200 and direct["passages"]
        with static_site(allowed) as site:
            dom = page_dom(f"{site}/index.html?{query}")
        with static_site(other) as site:
            refused = page_dom(f"{site}/index.html?{query}")
    finally:
        srv.stop()
    assert _body_state(dom) == "done", dom
    assert re.findall(r"<li>(.*?)<div", dom) == [html.escape(p["text"], quote=False) for p in direct["passages"]]
    assert f"{len(direct['passages'])} passages, {direct['tokens']} tokens (request " in dom
    assert re.search(r"\(request [0-9a-f]{32}\)", dom)  # the X-Request-Id header was exposed to the page
    assert _body_state(refused) == "failed"
    assert f"with --cors-origin http://127.0.0.1:{other}?" in refused and "<li>" not in refused
