"""A live `cyber-agent serve` subprocess and small client helpers for the server tests.

Each server is a subprocess (`python -m cyber_agent.cli serve --port 0`) with a
FileSystemTraceStore in a temporary directory and the runner of `server_factories.py`
(scripted behaviour by task prefix, the offline demo model otherwise). Port 0 lets the kernel
pick a free port; `ServerProcess.start` reads it from uvicorn's start-up line. Tests talk to it
with httpx and the `websockets` client — only 127.0.0.1 traffic — and may SIGKILL and restart it.
Timeouts here only keep a broken run from hanging the suite; no test passes or fails on timing.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
_STARTED = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
START_TIMEOUT = 60.0
WAIT_TIMEOUT = 30.0


class ServerProcess:
    """One `cyber-agent serve` subprocess over a store directory; restartable on the same store."""

    def __init__(self, root: Path, *, extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 cwd: Path = REPO) -> None:
        self.root = root
        self.store_path = root / "store"
        self.work = root / "work"
        self.experiences = root / "cache" / "experiences.md"
        self.work.mkdir(parents=True, exist_ok=True)
        self.extra_args = extra_args
        self.extra_env = env or {}
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        self.starts += 1
        log_path = self.root / f"server-{self.starts}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI", "ANTHROPIC", "SERPER"))}
        env.update({
            "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")]),
            "SERVER_TEST_DIR": str(self.work),
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        })
        args = [sys.executable, "-m", "cyber_agent.cli", "serve", "--port", "0", "--store", str(self.store_path),
                "--runner-factory", "server_factories:make_runner", "--experiences", str(self.experiences),
                *self.extra_args]
        with open(log_path, "wb") as log:
            # A session of its own, so kill() also reaches a reloader's worker process.
            self.process = subprocess.Popen(args, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = log_path.read_text(errors="replace")
            match = _STARTED.search(text)
            if match and "Application startup complete" in text:  # with --reload the worker starts later
                self.port = int(match.group(1))
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server did not start; log:\n{log_path.read_text(errors='replace')}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=WAIT_TIMEOUT)

    def terminate(self) -> int:
        """SIGTERM: uvicorn shuts down gracefully; return the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=WAIT_TIMEOUT)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.root.glob("server-*.log")))

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=WAIT_TIMEOUT)

    def store(self) -> Any:
        """A reader of the server's store (the server stays the only writer)."""
        from cyber_agent.trace import FileSystemTraceStore

        return FileSystemTraceStore(self.store_path)


def wait_for(predicate: Any, what: str, timeout: float = WAIT_TIMEOUT, interval: float = 0.05) -> Any:
    """Poll `predicate` until it returns a truthy value; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def trace_of(http: httpx.Client, trace_id: str) -> dict[str, Any]:
    response = http.get(f"/api/traces/{trace_id}")
    assert response.status_code == 200, response.text
    return response.json()["trace"]


def wait_idle(http: httpx.Client, trace_id: str) -> dict[str, Any]:
    """Wait until no run of the trace is active in the server; return the trace."""
    wait_for(lambda: trace_id not in http.get("/api/traces/running").json()["trace_ids"], f"{trace_id} to finish")
    return trace_of(http, trace_id)


def start_run(http: httpx.Client, task: str, **fields: Any) -> str:
    response = http.post("/api/traces", json={"messages": [{"role": "user", "content": task}], **fields})
    assert response.status_code == 202, response.text
    return response.json()["trace_id"]
