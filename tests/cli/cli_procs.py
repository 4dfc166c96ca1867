"""Run `cyber-agent` as a real subprocess (pipes or a pty) and a local OpenAI-compatible server.

`cli(...)` runs the command line with pipes (stdout and stderr are not terminals); `cli_on_pty`
runs it with stdin, stdout and stderr on a pseudo-terminal and returns everything the terminal
received. `ChatServer` answers `/v1/chat/completions` on 127.0.0.1 from a script: the tool
result of a previous call ends the run with a text answer; otherwise it calls `bash_command`
when the request offers it and answers in text when it does not. It records every request
body, and streams (server-sent events) when the client asks to. Timeouts only stop a hung run.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "cli-output.schema.json").read_text(encoding="utf-8"))
TIMEOUT = 120


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no provider keys, proxies or agent settings of the caller."""
    drop = ("AGENT_", "OPENAI", "ANTHROPIC", "CYBER_AGENT_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
            "http_proxy", "https_proxy", "all_proxy")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update({"PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost", "COLUMNS": "250", **extra})
    return env


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m cyber_agent.cli ARGS` with pipes; its output as text."""
    return subprocess.run([sys.executable, "-m", "cyber_agent.cli", *args], cwd=cwd, env=env or clean_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)


def cli_on_pty(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`python -m cyber_agent.cli ARGS` on a pseudo-terminal; its exit status and all it wrote there."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "cyber_agent.cli", *args], cwd=cwd, env=env or clean_env(),
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every holder of the terminal's other end has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return process.wait(timeout=TIMEOUT), b"".join(chunks).decode("utf-8", errors="replace")


def validated(text: str) -> dict[str, Any]:
    """The one JSON document `text` holds, validated against the published schema."""
    document = json.loads(text)
    jsonschema.validate(document, SCHEMA)
    return document


class ChatServer:
    """A scripted OpenAI-compatible chat server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, command: str = "touch shell-ran") -> None:
        self.command = command
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                owner.requests.append(body)
                owner._answer(self, body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def offered_tools(self, index: int = 0) -> list[str]:
        """Tool names the client offered in request `index`."""
        return [t["function"]["name"] for t in self.requests[index].get("tools") or []]

    def _reply(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        tool_results = [m for m in body["messages"] if m.get("role") == "tool"]
        if tool_results:
            return f"The shell said: {str(tool_results[-1].get('content'))[:60]}", []
        if "bash_command" in [t["function"]["name"] for t in body.get("tools") or []]:
            call = {"id": "call_1", "type": "function",
                    "function": {"name": "bash_command", "arguments": json.dumps({"command": self.command})}}
            return "Running a command.", [call]
        return "Streamed hello from the local model.", []

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        text, calls = self._reply(body)
        usage = {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = calls
            payload = {"id": "x", "object": "chat.completion", "model": body["model"], "usage": usage,
                       "choices": [{"index": 0, "message": message,
                                    "finish_reason": "tool_calls" if calls else "stop"}]}
            data = json.dumps(payload).encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("connection", "close")
        handler.end_headers()
        words = text.split(" ")
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": words[0]}}]}]
        chunks += [{"choices": [{"index": 0, "delta": {"content": " " + w}}]} for w in words[1:]]
        for i, call in enumerate(calls):
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [{**call, "index": i}]}}]})
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]})
        chunks.append({"choices": [], "usage": usage})
        for chunk in chunks:
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True
