"""A real receiver: the recursive demo tree over OTLP/HTTP to Arize Phoenix, read back through its REST API.

Phoenix is heavy (about 850 MB installed, 20-40 s to start), so it is not in the `dev` extra and
this test is marked `phoenix`. Run it by hand (docs/otel.md):

    python -m venv /tmp/phx && /tmp/phx/bin/pip install arize-phoenix
    CYBER_AGENT_PHOENIX=/tmp/phx/bin/phoenix python -m pytest -q -m phoenix tests/otel/test_phoenix.py

Without a `phoenix` executable (`CYBER_AGENT_PHOENIX` or `PATH`) it reports itself skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from conftest import run_demo
from cyber_agent.otel import export_otel, tree_spans
from cyber_agent.trace import InMemoryTraceStore

pytestmark = pytest.mark.phoenix

START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - a loopback URL the test built
        return json.load(response)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A `phoenix serve` on free loopback ports with its own working directory; yields its base URL."""
    executable = os.environ.get("CYBER_AGENT_PHOENIX") or shutil.which("phoenix")
    if not executable:
        pytest.skip("no phoenix executable: set CYBER_AGENT_PHOENIX (docs/otel.md, 'A real receiver')")
    workdir = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (workdir / "serve.log").open("w")
    process = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"phoenix serve exited with {process.returncode}: {Path(log.name).read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):  # noqa: S310
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"phoenix did not answer within {START_TIMEOUT_S:.0f} s")
                time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


async def test_the_demo_tree_arrives_in_phoenix_as_sent(phoenix):
    store = InMemoryTraceStore()
    root = await run_demo(store, "recursive")
    exporter = OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")
    done = await export_otel(store, root, exporter=exporter)
    exporter.shutdown()
    assert done.exported
    expected = {format(s.context.span_id, "016x"): s for s in await tree_spans(store, root)}

    deadline = time.monotonic() + 30
    while True:  # Phoenix ingests in the background
        spans = [s for s in get_json(f"{phoenix}/v1/projects/default/spans?limit=1000")["data"]
                 if s["context"]["trace_id"] == done.trace_id]
        if len(spans) >= len(expected) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    got = {s["context"]["span_id"]: s for s in spans}
    assert set(got) == set(expected)
    for span_id, span in got.items():
        sent = expected[span_id]
        assert span["name"] == sent.name
        assert span["parent_id"] == (format(sent.parent.span_id, "016x") if sent.parent else None)
    # Phoenix reads the GenAI operation names into its own span kinds.
    assert Counter(s["span_kind"] for s in spans) == {"AGENT": done.by_operation["invoke_agent"],
                                                     "LLM": done.by_operation["chat"],
                                                     "TOOL": done.by_operation["execute_tool"]}
    traces = await store.read_records([root])
    tokens = sum(r.trace["total_prompt_tokens"] for r in traces)
    assert sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in spans if s["span_kind"] == "LLM") == tokens
    [top] = [s for s in spans if s["parent_id"] is None]
    assert top["name"] == "invoke_agent main" and top["attributes"]["gen_ai.conversation.id"] == root
    assert {"cyber_agent.anchor", "cyber_agent.validation", "cyber_agent.review"} <= {e["name"] for e in top["events"]}
