"""The server's browsable pages: ``GET /docs`` shows ``/openapi.json`` in Swagger UI, ``GET /`` links to it.

Swagger UI's files come from the ``swagger-ui-py`` package (installed with the ``[serve]``
extra), served from its folder under ``/docs/``: the page needs no network, and no third-party
file is kept in this repository. Without the package, ``/docs`` answers a JSON 404 that names
the install command; the API itself does not need it.

Example:
    >>> sorted(route.path for route in page_routes())
    ['/', '/docs', '/docs/{name}']
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Route

from .service import json_line

__all__ = ["page_routes", "swagger_ui_folder", "ASSETS"]

#: the Swagger UI files the page loads, by name
ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript",
          "swagger-ui-standalone-preset.js": "text/javascript", "favicon-32x32.png": "image/png"}
_START = """window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true, displayRequestDuration: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: "StandaloneLayout"
  });
});
"""
_DOCS = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>meteora-edge API</title>
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-ui-standalone-preset.js"></script>
<script src="/docs/start.js"></script>
</body>
</html>
"""
_HOME = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>meteora-edge</title></head>
<body>
<h1>meteora-edge</h1>
<p>Offline evidence selection for RAG.</p>
<ul>
<li><a href="/docs">/docs</a>: the API, browsable (try a request from the page)</li>
<li><a href="/openapi.json">/openapi.json</a>: the OpenAPI 3.1 document</li>
<li><a href="/v1/health">/v1/health</a> and <a href="/v1/models">/v1/models</a>: what this server runs</li>
</ul>
<p>POST <code>/v1/select</code> for a selection, <code>/v1/rerank</code> (also <code>/rerank</code>,
<code>/v2/rerank</code>) for apps that call a reranker.</p>
</body>
</html>
"""
_MISSING = "the /docs page needs Swagger UI's files: pip install \"meteora-edge[serve]\" (swagger-ui-py)"


def swagger_ui_folder() -> Path | None:
    """The folder of Swagger UI's files in the installed ``swagger-ui-py`` package (None when it is missing).

    Finds the package without importing it (its ``__init__`` loads handlers for other web frameworks).
    """
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


def _missing() -> Response:
    return Response(json_line({"error": _MISSING}), status_code=404, media_type="application/json")


async def _home(request: Request) -> Response:
    return HTMLResponse(_HOME)


async def _docs(request: Request) -> Response:
    return HTMLResponse(_DOCS) if swagger_ui_folder() is not None else _missing()


async def _asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "start.js":
        return Response(_START, media_type="text/javascript")
    folder = swagger_ui_folder()
    if folder is None:
        return _missing()
    if name not in ASSETS:
        return Response(json_line({"error": f"no file {name!r} under /docs"}), status_code=404,
                        media_type="application/json")
    return FileResponse(folder / name, media_type=ASSETS[name], headers={"Cache-Control": "max-age=3600"})


def page_routes() -> list[Route]:
    """The routes of ``/``, ``/docs`` and its files (``GET`` only)."""
    return [Route("/", _home, methods=["GET"]), Route("/docs", _docs, methods=["GET"]),
            Route("/docs/{name}", _asset, methods=["GET"])]
