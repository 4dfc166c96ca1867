"""/docs works offline: the page references only this origin, whose assets are served, behind the local-only guards."""

from __future__ import annotations

import re

import httpx
import pytest

EXPECTED_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def _references(page: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", page) + re.findall(r"""url:\s*'([^']+)'""", page)


def test_the_docs_page_references_only_same_origin_assets_and_they_are_served(client: httpx.Client):
    response = client.get("/docs")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert "://" not in page and "//cdn" not in page, page
    references = _references(page)
    assert {"/openapi.json", "/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"} <= set(references)
    for reference in references:
        assert reference.startswith("/") and not reference.startswith("//"), reference
        asset = client.get(reference)
        assert asset.status_code == 200, reference
        suffix = re.search(r"\.\w+$", reference)
        if suffix and suffix.group() in EXPECTED_TYPES:
            assert asset.headers["content-type"].startswith(EXPECTED_TYPES[suffix.group()]), (reference, asset.headers)
    assert "SwaggerUIBundle" in client.get("/docs/assets/swagger-ui-bundle.js").text


@pytest.mark.parametrize("path", ["/docs", "/docs/assets/swagger-ui.css", "/docs/assets/swagger-ui-bundle.js"])
def test_the_docs_page_and_its_assets_keep_the_local_only_guards(client: httpx.Client, path: str):
    refused_host = client.get(path, headers={"Host": "evil.example"})
    assert refused_host.status_code == 400 and refused_host.json()["error"] == "host_not_allowed"
    refused_origin = client.get(path, headers={"Origin": "http://evil.example"})
    assert refused_origin.status_code == 403 and refused_origin.json()["error"] == "origin_not_allowed"


def test_redoc_is_not_served_from_a_cdn(client: httpx.Client):
    assert client.get("/redoc").status_code == 404
