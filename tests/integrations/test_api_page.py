"""/docs, the browsable API page: Swagger UI's files from the swagger-ui-py package, no other host named,
linked from /; in headless Chromium with every other host unreachable it renders the routes (skipped
without a `chromium` binary)."""

from __future__ import annotations

import http.client
import re
import subprocess
import tempfile

import pytest

from server_process import ServerProcess
from test_browser_example import CHROMIUM

pytest.importorskip("uvicorn")

from meteora_edge.integrations.api_page import ASSETS, swagger_ui_folder  # noqa: E402


def fetch(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server():
    if swagger_ui_folder() is None:
        pytest.skip("swagger-ui-py is not installed (pip install \"meteora-edge[serve]\")")
    srv = ServerProcess()
    yield srv
    srv.stop()


def test_the_page_and_its_files_come_from_the_server_only(server):
    status, kind, page = fetch(server.port, "/docs")
    assert status == 200 and kind.startswith("text/html")
    assert not re.search(rb"(src|href)=\"(https?:)?//", page)  # no other host: no CDN
    for name in re.findall(rb"(?:src|href)=\"(/docs/[^\"]+)\"", page):
        status, kind, body = fetch(server.port, name.decode())
        assert status == 200 and body, name
    assert fetch(server.port, "/docs/swagger-ui.css")[2] == (swagger_ui_folder() / "swagger-ui.css").read_bytes()
    status, kind, body = fetch(server.port, "/docs/../pyproject.toml")
    assert status == 404 and kind.startswith("application/json")
    status, kind, body = fetch(server.port, "/docs/swagger-editor-bundle.js")  # only the files the page loads
    assert status == 404 and b"no file" in body and "swagger-editor-bundle.js" not in ASSETS
    status, kind, home = fetch(server.port, "/")
    assert status == 200 and b'href="/docs"' in home


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary; apt-get install -y chromium")
def test_the_page_renders_every_route_in_chromium_without_the_network(server):
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                               "--virtual-time-budget=20000", "--dump-dom", f"{server.url}/docs"],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = set(re.findall(r'data-path="([^"]+)"', proc.stdout))
    assert {"/v1/select", "/v1/rerank", "/rerank", "/v2/rerank", "/v1/models", "/v1/health"} <= shown, \
        proc.stdout[:3000]
    assert "meteora-edge" in proc.stdout


def test_without_swagger_ui_the_page_says_how_to_install_it_and_the_api_works(monkeypatch):
    from meteora_edge.integrations import api_page
    from meteora_edge.integrations.service import SelectService
    from test_serve_api import AppServer, exchange

    monkeypatch.setattr(api_page, "swagger_ui_folder", lambda: None)
    srv = AppServer(SelectService())
    try:
        status, _, answer = exchange(srv.port, "GET", "/docs")
        assert status == 404 and answer == {"error": api_page._MISSING}
        assert exchange(srv.port, "GET", "/docs/swagger-ui-bundle.js")[0] == 404
        assert exchange(srv.port, "POST", "/v1/rerank", {"query": "q", "documents": ["q a"]})[0] == 200
    finally:
        srv.stop()
