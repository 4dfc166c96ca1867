"""How long can a CLI run hang on a provider that never answers? Arithmetic, then one real measurement.

The worst case of one model call against a server that accepts the connection and then says
nothing is `(retries + 1) x timeout` plus the backoff slept between attempts
(`min(backoff_cap, 2^i) x (1 + jitter)` before retry i). This script prints that bound for the
old defaults (600 s, 4 retries) and the new ones (`ProviderSettings`: 120 s, 2 retries), then
runs the real `cyber-agent run` command with tiny settings against a local silent socket
(127.0.0.1 only) and compares the measured wall time with the same formula. Last, one
streamed call against a server that sends `: keep-alive` forever: the read timeout never fires
there, the per-call `deadline` ends it (median of 3; the first includes the imports).

    .venv/bin/python bench/provider_hang.py            # ~5 s
    .venv/bin/python bench/provider_hang.py --timeout 1 --retries 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
JITTER = 0.25  # RetryPolicy.jitter: each backoff is stretched by at most this fraction


def worst_case(timeout: float, retries: int, backoff_cap: float, base_delay: float = 1.0) -> tuple[float, float]:
    """Return (bound without jitter, bound with the largest jitter) in seconds for one model call."""
    waits = sum(min(backoff_cap, base_delay * 2.0**i) for i in range(retries))
    reads = (retries + 1) * timeout
    return reads + waits, reads + waits * (1 + JITTER)


class SilentServer:
    """Accept connections on 127.0.0.1 and never send a byte; count them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)  # kept open and silent

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


class TrickleServer:
    """Answer every request with a 200 event stream that sends `: keep-alive` every 50 ms, forever."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    @staticmethod
    def _trickle(conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            while True:
                conn.sendall(b": keep-alive\n\n")
                time.sleep(0.05)
        except OSError:
            conn.close()  # the client gave up: what a bounded client does

    def close(self) -> None:
        self.sock.close()


async def _call_until_deadline(port: int, deadline: float) -> str:
    from cyber_agent.llm import OpenAICompatModel, ProviderSettings

    settings = ProviderSettings(timeout=1.0, retries=2, deadline=deadline).resolved({})
    model = OpenAICompatModel(base_url=f"http://127.0.0.1:{port}/v1", env={}, **settings.provider_options())
    try:
        await model([{"role": "user", "content": "hi"}], "m", on_delta=lambda _t: None)
    except Exception as exc:  # noqa: BLE001 - the bench reports what the call raised
        return str(exc)
    return "answered (unexpected)"


def run_cli(port: int, timeout: float, retries: int, backoff_cap: float, store: str,
            extra: tuple[str, ...] = ()) -> tuple[float, int, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update({"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "bench-key",
                "CYBER_AGENT_BACKOFF_CAP": str(backoff_cap), "PYTHONPATH": str(ROOT)})
    command = [sys.executable, "-m", "cyber_agent.cli", "--store", store, "run", "say hi", "--model", "openai:silent",
               "--timeout", str(timeout), "--retries", str(retries), *extra]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120 + 10 * timeout * (retries + 1))
    elapsed = time.perf_counter() - started
    answer = next((line for line in done.stdout.splitlines() if "model call failed" in line), done.stderr.strip()[-300:])
    return elapsed, done.returncode, answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=0.5, help="read timeout of the measured run (s)")
    parser.add_argument("--retries", type=int, default=2, help="retries of the measured run")
    parser.add_argument("--backoff-cap", type=float, default=0.25, help="backoff cap of the measured run (s)")
    parser.add_argument("--deadline", type=float, default=2.0, help="deadline of the keep-alive run (s)")
    args = parser.parse_args()

    print("worst case of one model call against a server that never answers (formula):")
    for label, timeout, retries, cap in (("before: 600 s x 5 attempts", 600.0, 4, 30.0),
                                         ("after:  120 s x 3 attempts", 120.0, 2, 30.0)):
        low, high = worst_case(timeout, retries, cap)
        print(f"  {label}: {low:8.1f} s .. {high:8.1f} s  ({high / 60:5.1f} min)")

    server = SilentServer()
    try:
        with tempfile.TemporaryDirectory() as store:
            startup, _, _ = run_cli(1, 0.1, 0, 0.0, store)  # port 1: refused at once, so this is start-up cost
            elapsed, code, answer = run_cli(server.port, args.timeout, args.retries, args.backoff_cap, store)
    finally:
        server.close()
    low, high = worst_case(args.timeout, args.retries, args.backoff_cap)
    print(f"measured: `cyber-agent run --timeout {args.timeout} --retries {args.retries}` "
          f"(CYBER_AGENT_BACKOFF_CAP={args.backoff_cap}) against a silent 127.0.0.1 socket")
    print(f"  wall {elapsed:.2f} s, of which CLI start-up and teardown ~{startup:.2f} s; "
          f"model call ~{elapsed - startup:.2f} s (formula {low:.2f} .. {high:.2f} s)")
    print(f"  connections the silent server accepted: {len(server.accepted)} (expected {args.retries + 1}); exit code {code}")
    print(f"  the run said: {answer}")
    trickle = TrickleServer()
    try:
        walls, error = [], ""
        for _ in range(3):
            started = time.perf_counter()
            error = asyncio.run(_call_until_deadline(trickle.port, args.deadline))
            walls.append(time.perf_counter() - started)
    finally:
        trickle.close()
    print(f"measured: one streamed call (timeout 1 s, 2 retries, deadline {args.deadline:g} s) against a 127.0.0.1 "
          "server sending `: keep-alive` every 50 ms forever (before the deadline existed it never ended)")
    print(f"  wall, median of 3: {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f})")
    print(f"  it said: {error[:160]}")
    return 0 if code == 1 and len(server.accepted) == args.retries + 1 and "deadline" in error else 1


if __name__ == "__main__":
    sys.exit(main())
