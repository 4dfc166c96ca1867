"""OpenAICompatModel against a real HTTP server on 127.0.0.1 streaming server-sent events."""

from __future__ import annotations

import asyncio
import json

from cyber_agent.llm import OpenAICompatModel

CHUNKS = [
    {"model": "local-model", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Local "}}]},
    {"choices": [{"index": 0, "delta": {"content": "answer"}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "ls", "arguments": "{\"path\":"}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " \".\"}"}}]},
                  "finish_reason": "tool_calls"}]},
    {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 6}},
]


async def test_streams_from_a_real_local_http_server(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # a CI proxy must not intercept 127.0.0.1
    received: list[dict] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line)
        length = int({k.lower(): v for k, v in headers.items()}["content-length"])
        received.append({"request_line": head.split(b"\r\n")[0].decode(),
                         "body": json.loads(await reader.readexactly(length))})
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        for chunk in CHUNKS:  # one write per event, so the client sees a genuinely chunked stream
            writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await writer.drain()
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        llm = OpenAICompatModel(base_url=f"http://127.0.0.1:{port}/v1", env={})
        deltas: list[str] = []
        reply = await llm([{"role": "user", "content": "hi"}], "local-model", on_delta=deltas.append)

    assert received[0]["request_line"] == "POST /v1/chat/completions HTTP/1.1"
    assert received[0]["body"]["stream"] is True and received[0]["body"]["model"] == "local-model"
    assert deltas == ["Local ", "answer"] and reply.content == "Local answer"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("call_1", "ls", {"path": "."})]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (12, 6)
    assert reply.finish_reason == "tool_calls" and reply.cost_estimated
