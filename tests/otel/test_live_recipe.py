"""The live-export recipe of docs/otel.md as written, error statuses, retries as span events, and export-otel's headers and refusals."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from opentelemetry.trace import StatusCode

from conftest import REPO, run_demo
from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK, main
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm import OpenAICompatModel, RetryPolicy
from cyber_agent.otel import tree_spans
from cyber_agent.trace import FileSystemTraceStore, InMemoryTraceStore
from otlp_receiver import Receiver
from test_protocol import events, spans_of

USER = [{"role": "user", "content": "hi"}]


def _recipe() -> str:
    text = (REPO / "docs" / "otel.md").read_text(encoding="utf-8")
    live = text[text.index("## Live"):]
    return re.search(r"```python\n(.*?)```", live, re.S).group(1)


def _expected_operations() -> Counter[str]:
    async def build() -> Counter[str]:
        store = InMemoryTraceStore()
        config = RunConfig(model="demo", agent_mode="recursive", root_task_anchor=DEMO_ANCHOR)
        result = await AgentRunner(trace_store=store).run_result([{"role": "user", "content": DEMO_TASK}], config)
        return Counter(str(s.attributes["gen_ai.operation.name"]) for s in await tree_spans(store, result.trace.trace_id))

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, build()).result()


def test_the_live_recipe_run_as_written_delivers_every_span():
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("OTEL_")}
    with Receiver() as receiver:
        env.update({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url + "/v1/traces",
                    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-recipe=yes", "PYTHONPATH": str(REPO)})
        done = subprocess.run([sys.executable, "-c", _recipe()], env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        spans = {s.span_id: s for s in receiver.spans}  # the latest version of each span
    root_id, status = done.stdout.split()
    assert status == "completed"
    operations: Counter[str] = Counter()
    for span in spans.values():
        attributes = {a.key: a.value.string_value for a in span.attributes}
        operations[attributes["gen_ai.operation.name"]] += 1
    assert operations == _expected_operations() and sum(operations.values()) > 100
    roots = [s for s in spans.values() if not s.parent_span_id]
    assert len(roots) == 1 and roots[0].name.startswith("invoke_agent")  # the root span was among them
    assert {h.get("x-recipe") for h in receiver.headers} == {"yes"}


async def test_failed_and_stopped_roots_are_error_spans():
    store = InMemoryTraceStore()
    runner = AgentRunner(trace_store=store)
    result = await runner.run_result(USER, RunConfig(model="demo", max_iterations=1))
    stopped = await store.update_trace(result.trace.trace_id, status="stopped", error_message="stop requested")
    span = (await spans_of(store, stopped.trace_id)).agent(stopped.trace_id)
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "stop requested"
    assert span.attributes["error.type"] == "stopped" and span.attributes["cyber_agent.stop_reason"] == "stop requested"


async def test_retries_are_span_events_of_their_chat_span():
    answers = [httpx.Response(429), httpx.Response(200, json={"choices": [{"message": {"content": "done"},
                                                                           "finish_reason": "stop"}]})]

    async def no_sleep(_seconds: float) -> None:
        return None

    llm = OpenAICompatModel(base_url="http://127.0.0.1:9/v1", env={}, sleep=no_sleep, retry=RetryPolicy(jitter=0),
                            transport=httpx.MockTransport(lambda request: answers.pop(0)))
    store = InMemoryTraceStore()
    result = await AgentRunner(trace_store=store, llm_call=llm).run_result(USER, RunConfig(model="gpt-4o"))
    index = await spans_of(store, result.trace.trace_id)
    [chat] = [s for s in index.spans if s.name.startswith("chat")]
    [retry] = events(chat, "cyber_agent.llm_retry")
    assert (retry["cyber_agent.retry.attempt"], retry["cyber_agent.retry.status"], retry["cyber_agent.retry.error"]) == (
        1, 429, "HTTP 429")


@pytest.fixture(scope="module")
def stored_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("otel-store")
    with ThreadPoolExecutor(1) as pool:
        return path, pool.submit(asyncio.run, run_demo(FileSystemTraceStore(path), "legacy")).result()


def test_export_otel_sends_the_standard_headers_and_each_header_flag(stored_tree, monkeypatch):
    path, root = stored_tree
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=blue,authorization=Bearer%20old")
    with Receiver() as receiver:
        code = main(["--store", str(path), "export-otel", root, "--endpoint", receiver.url,
                     "--header", "Authorization=Bearer new", "--header", "x-mlflow-experiment-id=7"])
    assert code == 0
    [headers] = receiver.headers
    assert (headers["authorization"], headers["x-team"], headers["x-mlflow-experiment-id"]) == ("Bearer new", "blue", "7")


def test_export_otel_rejects_a_header_without_a_value(stored_tree, capsys):
    path, root = stored_tree
    assert main(["--store", str(path), "export-otel", root, "--endpoint", "http://127.0.0.1:9", "--header", "nothing"]) == 2
    assert "--header" in capsys.readouterr().err


def test_a_refusing_collector_is_reported_with_its_status_and_answer(stored_tree, capsys):
    path, root = stored_tree
    with Receiver(status=422, answer=b'{"detail": "experiment 7 does not exist"}') as receiver:
        code = main(["--store", str(path), "export-otel", root, "--endpoint", receiver.url])
    assert code == 1
    err = capsys.readouterr().err
    assert "answered HTTP 422" in err and "experiment 7 does not exist" in err and "is the collector running" not in err
