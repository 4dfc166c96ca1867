"""The interactive API page at /docs, served entirely from this origin (it works offline).

FastAPI's default /docs loads Swagger UI's script and style from a CDN into the API's own
origin. Here the assets come from the installed `swagger-ui-bundle-v2` package (Swagger UI 5,
which reads OpenAPI 3.1), mounted at /docs/assets; the page references nothing else. Both pass
through `LocalOnlyMiddleware` like every other route. Without the package (a server installed
without the `server` extra's assets), /docs answers a short page that says what to install.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_PATH", "DOCS_PATH", "install_docs_page", "swagger_ui_dir"]

DOCS_PATH = "/docs"
"""Where the interactive page is served."""
ASSETS_PATH = "/docs/assets"
"""Where Swagger UI's script, style and icons are served."""

_MISSING = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>
<h1>{title}</h1><p>The interactive page needs Swagger UI's files, which are not installed here:
<code>pip install 'cyber-agent[server]'</code> (the <code>swagger-ui-bundle-v2</code> package).
The API itself works; its OpenAPI document is at <a href="{openapi_url}">{openapi_url}</a>.</p></body></html>"""


def swagger_ui_dir() -> Path | None:
    """Return the installed Swagger UI directory, or None when the package is missing."""
    try:  # imported by name: the package ships no type information
        bundle = importlib.import_module("swagger_ui_bundle")
    except ImportError:
        return None
    path = Path(str(bundle.swagger_ui_path))
    return path if (path / "swagger-ui-bundle.js").is_file() else None


def install_docs_page(app: FastAPI, *, title: str, openapi_url: str = "/openapi.json") -> None:
    """Serve /docs and its assets from this origin (create `app` with docs_url=None)."""
    assets = swagger_ui_dir()
    if assets is None:
        page = _MISSING.format(title=title, openapi_url=openapi_url)

        @app.get(DOCS_PATH, include_in_schema=False)
        async def docs_missing() -> HTMLResponse:
            return HTMLResponse(page)

        return
    app.mount(ASSETS_PATH, StaticFiles(directory=assets), name="swagger_ui_assets")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{title} - docs",
                                   swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
                                   # The online validator badge would load an image from another origin.
                                   swagger_ui_parameters={"validatorUrl": None})
