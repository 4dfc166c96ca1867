"""GET latency of a live server while the worst tool calls of the [hardening] issue run.

    python bench/tool_latency.py                       # 3 runs per call, this checkout
    python bench/tool_latency.py --quick --json /tmp/latency.json
    PYTHONPATH=/tmp/base python bench/tool_latency.py --code /tmp/base   # another checkout (before)

Starts `cyber-agent serve --port 0` on 127.0.0.1 (a temporary file store) whose runner is
`make_runner` below: a scripted model that makes one call per run, then answers. For each call
a client posts the run, then sends `GET /api/traces` back to back until the run ends, and
records every latency. The calls:

- `list_files_escape`: `list_files(pattern='../../../../**/*')` from `/tmp/<tmp>/a/ws`, so the
  pattern leads to `/` (before: a walk of the whole filesystem on the event loop);
- `evaluate_bigint`: `[2**999999 // 3**315000 for _ in [1, 2, 3]]`;
- `slow_sync`: a sync tool that sleeps 2 s (`time.sleep`, as blocking I/O would).

Printed and written (`--json`): per call, the median and the worst GET latency over every GET of
every run, and how long the run took. The bench runs only on loopback. No pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_files_escape": ("list_files", {"pattern": "../../../../**/*"}),
    "evaluate_bigint": ("evaluate", {"expression": "[2**999999 // 3**315000 for _ in [1, 2, 3]]"}),
    "slow_sync": ("slow_sync", {"seconds": 2.0}),
}
_STARTED = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


# ---- the server side: loaded by `serve --runner-factory tool_latency:make_runner` -------------
def make_runner(store: Any) -> Any:
    """A runner whose model makes the call named by the task, then answers."""
    from cyber_agent.core.runner import AgentRunner, default_registry
    from cyber_agent.llm.types import LLMResponse, ToolCall

    registry = default_registry()

    def slow_sync(seconds: float) -> str:
        """Sleep (a sync tool doing blocking I/O)."""
        time.sleep(seconds)
        return "slept"

    registry.register(slow_sync)

    async def model(messages: list[dict[str, Any]], model: str, tools: Any = None, temperature: Any = None, *,
                    on_delta: Any = None) -> Any:
        if messages[-1].get("role") == "tool":
            return LLMResponse(content="done")
        task = next(str(m.get("content")) for m in messages if m.get("role") == "user")
        name, arguments = CALLS[task]
        return LLMResponse(content="", tool_calls=[ToolCall(id="c1", name=name, arguments=arguments)])

    workspace = Path(os.environ["TOOL_LATENCY_WORKSPACE"])
    return AgentRunner(trace_store=store, llm_call=model, tool_registry=registry, workspace=workspace)


# ---- the client side ---------------------------------------------------------------------------
def start_server(root: Path, code: Path) -> tuple[subprocess.Popen[bytes], str]:
    workspace = root / "a" / "ws"
    workspace.mkdir(parents=True)
    if (workspace / "../../../..").resolve() != Path("/"):
        print(f"note: ../../../../ from {workspace} is not /; the escape walks less than the whole filesystem")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI", "ANTHROPIC", "SERPER"))}
    env.update({"PYTHONPATH": os.pathsep.join([str(BENCH), str(code)]), "PYTHONUNBUFFERED": "1",
                "TOOL_LATENCY_WORKSPACE": str(workspace)})
    log = root / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cyber_agent.cli", "serve", "--port", "0", "--store", str(root / "store"),
             "--runner-factory", "tool_latency:make_runner", "--experiences", str(root / "exp.md")],
            cwd=code, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        match = _STARTED.search(text)
        if match and "Application startup complete" in text:
            return proc, f"http://127.0.0.1:{match.group(1)}"
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')}")


def measure(url: str, call: str, runs: int) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    durations: list[float] = []
    with httpx.Client(base_url=url, timeout=120) as http:
        for _ in range(runs):
            started = time.perf_counter()
            response = http.post("/api/traces", json={"messages": [{"role": "user", "content": call}]})
            response.raise_for_status()
            trace_id = response.json()["trace_id"]
            while True:
                t0 = time.perf_counter()
                http.get("/api/traces").raise_for_status()
                latencies.append(time.perf_counter() - t0)
                if trace_id not in http.get("/api/traces/running").json()["trace_ids"]:
                    break
            durations.append(time.perf_counter() - started)
    return {"call": call, "gets": len(latencies), "median_get_s": round(statistics.median(latencies), 4),
            "max_get_s": round(max(latencies), 4), "median_run_s": round(statistics.median(durations), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per call (default 3)")
    parser.add_argument("--quick", action="store_true", help="one run per call")
    parser.add_argument("--code", default=str(REPO), help="checkout whose cyber_agent the server runs")
    parser.add_argument("--only", help="comma-separated subset of: " + ",".join(CALLS))
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    calls = [c for c in CALLS if not args.only or c in args.only.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-tool-latency-", dir="/tmp") as tmp:
        proc, url = start_server(Path(tmp), Path(args.code).resolve())
        try:
            print(f"{'call':<20} {'GETs':>5} {'median GET':>11} {'worst GET':>10} {'run':>8}")
            for call in calls:
                row = measure(url, call, runs)
                results.append(row)
                print(f"{call:<20} {row['gets']:>5} {row['median_get_s']:>10.4f}s {row['max_get_s']:>9.4f}s "
                      f"{row['median_run_s']:>7.3f}s", flush=True)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if args.json:
        Path(args.json).write_text(json.dumps({"code": args.code, "runs": runs, "calls": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
