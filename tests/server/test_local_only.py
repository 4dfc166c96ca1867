"""The API answers only local clients: Host, Origin and CORS checks over real HTTP and WebSocket."""

from __future__ import annotations

import json

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from live_server import ServerProcess, start_run, wait_idle

FRONT_END = "http://localhost:3000"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "localhost:8000", "127.0.0.1:3", "LOCALHOST:9"])
def test_local_host_headers_are_served(client: httpx.Client, host: str):
    assert client.get("/api/traces", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.5:8000",
                                  "[::1]:8000", "localhost:http", "0.0.0.0"])
def test_foreign_host_headers_are_refused_with_a_clear_json_error(client: httpx.Client, host: str):
    response = client.get("/api/traces", headers={"Host": host})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "host_not_allowed" and repr(host) in body["detail"]


def test_a_request_without_host_header_is_refused(server: ServerProcess):
    import socket

    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /api/traces HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400") and b"host_not_allowed" in reply


def test_cors_answers_the_local_front_end_only(client: httpx.Client):
    preflight = {"Origin": FRONT_END, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}
    allowed = client.options("/api/traces", headers=preflight)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == FRONT_END
    simple = client.get("/api/traces", headers={"Origin": "http://127.0.0.1:3000"})
    assert simple.status_code == 200 and simple.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"

    foreign = client.options("/api/traces", headers={**preflight, "Origin": "http://evil.example"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers


def test_a_foreign_origin_cannot_even_send_a_simple_request(client: httpx.Client):
    """CORS alone would let a foreign page fire a body-less POST; the Origin check refuses it."""
    for origin in ("http://evil.example", "null", "http://localhost:3001"):
        response = client.post("/api/traces/00000000-0000-4000-8000-000000000000/stop", headers={"Origin": origin})
        assert response.status_code == 403, origin
        assert response.json()["error"] == "origin_not_allowed"


def test_the_apis_own_origin_is_allowed(server: ServerProcess, client: httpx.Client):
    """Same-origin pages (e.g. the /docs page served by the API) may call it."""
    assert client.get("/api/traces", headers={"Origin": server.url}).status_code == 200
    assert client.get("/docs").status_code == 200


def test_the_openapi_spec_is_served_and_lists_every_endpoint(client: httpx.Client):
    spec = client.get("/openapi.json").json()
    paths = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert {("/api/traces", "get"), ("/api/traces", "post"), ("/api/traces/{trace_id}", "get"),
            ("/api/traces/{trace_id}/messages", "get"), ("/api/traces/{trace_id}/run", "post"),
            ("/api/traces/{trace_id}/stop", "post"), ("/api/traces/running", "get"),
            ("/api/traces/{trace_id}/reflect", "post"), ("/api/experiences", "get"),
            ("/api/traces/{trace_id}/tool-approvals/pending", "get"),
            ("/api/traces/{trace_id}/tool-approvals/{batch_id}", "post"),
            ("/api/extractions", "get"), ("/api/extractions/{extraction_id}", "post")} <= paths
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            schema = op["responses"][next(c for c in op["responses"] if c.startswith("2"))]
            assert "content" in schema, f"{method} {path} documents no response body"
    create = spec["components"]["schemas"]["CreateTraceRequest"]["properties"]
    assert create["root_completion_criteria"]["deprecated"] is True


async def test_websocket_origin_rules(server: ServerProcess, client: httpx.Client):
    trace_id = start_run(client, "echo")
    wait_idle(client, trace_id)
    url = f"{server.ws_url}/api/traces/{trace_id}/watch"
    # Non-browser clients send no Origin: allowed (they already run on this machine).
    async with websockets.connect(url) as ws:
        assert json.loads(await ws.recv())["type"] == "connected"
    async with websockets.connect(url, origin=FRONT_END) as ws:
        assert json.loads(await ws.recv())["type"] == "connected"
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url, origin="http://evil.example"):
            pass
    assert refused.value.response.status_code == 403
    assert json.loads(refused.value.response.body)["error"] == "origin_not_allowed"
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(url, additional_headers={"Host": "evil.example"}):
            pass
    assert refused.value.response.status_code == 400
