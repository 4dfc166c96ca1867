"""How much memory does a 100 MB answer or error body cost a model call? Peak RSS growth, measured.

Each case runs in a fresh subprocess against a local server on 127.0.0.1 that sends a body of
`--mb` megabytes: a non-streamed answer, an error answer (HTTP 500), and a stream of text
deltas. The call goes through the provider boundary (`cyber_agent/llm/boundary.py`) with its
default caps (`max_body_bytes` 16 MiB, `max_error_bytes` 64 KiB, `max_output_chars` 4 M), and, side
by side, the same body is read whole with `httpx` (`response.aread()` then `json.loads`), which
is what the providers did before the boundary. Reported: the growth of the peak resident set
(`ru_maxrss`) over the process's baseline after imports, and what the call answered.

    .venv/bin/python bench/provider_bodies.py            # ~20 s
    .venv/bin/python bench/provider_bodies.py --mb 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import asyncio, json, resource, socket, sys, threading
kind, how, mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
import httpx
from cyber_agent.llm import OpenAICompatModel, ProviderSettings

SIZE = mb * 1024 * 1024
PIECE = b"a" * 65536

def serve(sock):
    conn, _ = sock.accept()
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        rest += conn.recv(65536)
    try:
        if kind == "stream":
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            delta = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "a" * 8000}}]}) + "\n\n").encode()
            for _ in range(SIZE // len(delta)):
                conn.sendall(delta)
            conn.sendall(b"data: [DONE]\n\n")
        else:
            status = b"200 OK" if kind == "answer" else b"500 Internal Server Error"
            opening = b'{"choices": [{"index": 0, "message": {"content": "' if kind == "answer" else b'{"error": {"message": "'
            closing = b'"}, "finish_reason": "stop"}]}' if kind == "answer" else b'"}}'
            body_len = len(opening) + (SIZE // len(PIECE)) * len(PIECE) + len(closing)
            conn.sendall(b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(body_len).encode() + b"\r\nconnection: close\r\n\r\n" + opening)
            for _ in range(SIZE // len(PIECE)):
                conn.sendall(PIECE)
            conn.sendall(closing)
    except OSError:
        pass  # the client stopped reading at its cap and hung up
    finally:
        conn.close()

sock = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=serve, args=(sock,), daemon=True).start()
url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

async def boundary():
    options = ProviderSettings(retries=0).resolved({}).provider_options()
    model = OpenAICompatModel(base_url=url, env={}, **options)
    try:
        reply = await model([{"role": "user", "content": "hi"}], "m",
                            on_delta=(lambda _t: None) if kind == "stream" else None)
        return f"answer of {len(reply.content)} characters"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:90]}"

async def whole():
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(url + "/chat/completions", json={"model": "m"})
        body = response.content
        if kind == "stream":
            return f"read {len(body)} bytes of stream"
        value = json.loads(body)
        return f"HTTP {response.status_code}, {len(body)} bytes decoded"

answer = asyncio.run(boundary() if how == "boundary" else whole())
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_mb": round((peak - base) / 1024, 1), "answer": answer}))
'''


def run(kind: str, how: str, mb: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", CHILD, kind, how, str(mb)], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        return {"growth_mb": float("nan"), "answer": done.stderr.strip()[-200:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=100, help="body size in MiB (default 100)")
    args = parser.parse_args()
    print(f"peak RSS growth of one model call receiving a {args.mb} MiB body (MiB; fresh process per case)")
    print(f"{'case':<8} {'boundary':>9}  {'whole read':>10}  boundary's answer")
    for kind in ("answer", "error", "stream"):
        bounded, whole = run(kind, "boundary", args.mb), run(kind, "whole", args.mb)
        print(f"{kind:<8} {bounded['growth_mb']:>9}  {whole['growth_mb']:>10}  {bounded['answer']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
