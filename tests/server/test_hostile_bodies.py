"""Hostile request bodies get a 4xx JSON error naming the field, on every POST route, never a 500.

The routes are enumerated from the application itself (its OpenAPI document — `app.routes`
holds included routers, not routes, in recent FastAPI — of `create_app` with triage, so every
router is included): a new POST endpoint is covered without touching this file. The in-process
checks go through the whole ASGI stack (middleware, routing, error handlers) with Starlette's
TestClient; one test repeats the worst cases over real HTTP against the live server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from cyber_agent.server.app import create_app
from cyber_agent.server.json_body import MAX_BODY_BYTES, MAX_DEPTH
from cyber_agent.trace import FileSystemTraceStore
from live_server import ServerProcess
from server_factories import make_runner

JSON = {"content-type": "application/json"}

# name → (raw body, the loc the answer must name, the input text it must show)
PARSE_ERRORS: dict[str, tuple[bytes, list[Any], str | None]] = {
    "nan": (b'{"max_iterations": NaN, "messages": []}', ["body", "max_iterations"], "NaN"),
    "infinity": (b'{"messages": [{"role": "user", "content": Infinity}]}', ["body", "messages", 0, "content"], "Infinity"),
    "-infinity": (b'{"temperature": -Infinity}', ["body", "temperature"], "-Infinity"),
    "1e400": (b'{"decision": "approve", "score": 1e400}', ["body", "score"], "1e400"),
    "nested": (b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5), ["body", *([0] * MAX_DEPTH)], None),
    "recursion": (b"[" * 200_000 + b"]" * 200_000, ["body"], None),
    "invalid utf-8": (b'{"messages": "\xff\xfe"}', ["body"], None),
    "lone surrogate": (b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
                       ["body", "messages", 0, "content"], None),
    "not json": (b'{"messages": [', ["body", 14], None),
    "5000-digit int": (b'{"max_iterations": ' + b"9" * 5000 + b"}", ["body"], None),
}


def _routes(app: FastAPI) -> list[str]:
    paths = [path for path, operations in app.openapi()["paths"].items() if "post" in operations]
    return [re.sub(r"\{[^}]+\}", "x1", path) for path in paths]


@pytest.fixture(scope="module")
def app_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, list[str]]]:
    store = FileSystemTraceStore(tmp_path_factory.mktemp("hostile") / "store")
    # The triage object is never reached: every body here fails before an endpoint runs.
    app = create_app(store=store, runner_factory=make_runner, triage=object(),
                     experiences_path=tmp_path_factory.mktemp("cache") / "experiences.md")
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        yield client, _routes(app)


def test_every_router_is_enumerated(app_client: tuple[TestClient, list[str]]):
    _, routes = app_client
    assert {"/api/traces", "/api/traces/x1/run", "/api/triage", "/api/extractions/x1"} <= set(routes)


@pytest.mark.parametrize("case", sorted(PARSE_ERRORS))
def test_a_body_that_is_not_strict_json_is_a_422_naming_the_field(app_client: tuple[TestClient, list[str]], case: str):
    client, routes = app_client
    raw, loc, shown = PARSE_ERRORS[case]
    for path in routes:
        response = client.post(path, content=raw, headers=JSON)
        assert response.status_code == 422, (path, response.text[:500])
        body = response.json()
        assert body["error"] == "unprocessable", (path, body)
        issue = body["detail"][0]
        assert issue["loc"] == loc and issue["msg"], (path, issue)
        if shown is not None:
            assert issue["input"] == shown, (path, issue)


def test_a_body_over_the_size_limit_is_a_413(app_client: tuple[TestClient, list[str]]):
    client, routes = app_client
    raw = b'{"messages": "' + b"a" * MAX_BODY_BYTES + b'"}'
    for path in routes:
        response = client.post(path, content=raw, headers=JSON)
        assert response.status_code == 413, (path, response.text[:500])
        assert response.json()["error"] == "payload_too_large"
        assert str(MAX_BODY_BYTES) in response.json()["detail"]


def test_a_big_invalid_value_is_named_but_not_echoed_whole(app_client: tuple[TestClient, list[str]]):
    client, _ = app_client
    response = client.post("/api/traces", content=b'{"messages": "' + b"a" * 1_000_000 + b'"}', headers=JSON)
    assert response.status_code == 422
    issue = response.json()["detail"][0]
    assert issue["loc"] == ["body", "messages"]
    assert issue["input"].startswith("aaaa") and "1000000 characters" in issue["input"]
    assert len(response.content) < 2000


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_body_that_is_not_declared_json_is_a_415(app_client: tuple[TestClient, list[str]], content_type: str | None):
    client, routes = app_client
    headers = {} if content_type is None else {"content-type": content_type}
    for path in routes:
        response = client.post(path, content=b'{"messages": []}', headers=headers)
        assert response.status_code == 415, (path, response.text[:500])
        body = response.json()
        assert body["error"] == "unsupported_media_type" and repr(content_type) in body["detail"]


def test_an_empty_body_is_a_4xx_json_error(app_client: tuple[TestClient, list[str]]):
    client, routes = app_client
    for path in routes:
        response = client.post(path, content=b"", headers=JSON)
        assert 400 <= response.status_code < 500, (path, response.text[:500])
        assert "error" in response.json()


def test_a_pydantic_error_shows_the_value_as_text(app_client: tuple[TestClient, list[str]]):
    client, _ = app_client
    response = client.post("/api/traces", json={"messages": [{"role": "robot", "content": "x"}]})
    assert response.status_code == 422
    issue = response.json()["detail"][0]
    assert issue["loc"] == ["body", "messages", 0, "role"] and issue["input"] == "robot"


def test_over_real_http_hostile_bodies_are_4xx_and_never_a_traceback(server: ServerProcess, client: httpx.Client):
    for raw in (b'{"messages": [], "max_iterations": NaN}', b'{"temperature": 1e400}', b"[" * 100_000):
        response = client.post("/api/traces", content=raw, headers=JSON)
        assert response.status_code == 422 and response.json()["error"] == "unprocessable", response.text[:500]
    assert client.post("/api/traces", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    assert "Traceback" not in server.log(), server.log()[-4000:]
