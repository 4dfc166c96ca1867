"""`cyber-agent export-otel`: a stored tree over OTLP/HTTP to a local receiver; clear exits for bad input."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import run_demo
from cyber_agent.cli import main
from cyber_agent.otel import tree_spans
from cyber_agent.trace import FileSystemTraceStore
from otlp_receiver import Receiver


@pytest.fixture(scope="module")
def stored_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("otel-store")
    with ThreadPoolExecutor(1) as pool:
        return path, pool.submit(asyncio.run, run_demo(FileSystemTraceStore(path), "legacy")).result()


def test_the_command_sends_every_span_of_the_tree(stored_tree, capsys):
    path, root = stored_tree
    with Receiver() as receiver:
        assert main(["--store", str(path), "export-otel", root, "--endpoint", receiver.url]) == 0
    expected = asyncio.run(tree_spans(FileSystemTraceStore(path), root))
    assert receiver.paths == ["/v1/traces"]
    assert sorted(s.span_id for s in receiver.spans) == sorted(s.context.span_id.to_bytes(8, "big") for s in expected)
    assert {s.trace_id for s in receiver.spans} == {uuid.UUID(root).bytes}
    assert sorted(s.name for s in receiver.spans) == sorted(s.name for s in expected)
    out = capsys.readouterr().out
    operations = Counter(str(s.attributes["gen_ai.operation.name"]) for s in expected)
    counts = ", ".join(f"{n} {op}" for op, n in sorted(operations.items()))
    assert f"exported {len(expected)} spans ({counts}) of {root} to {receiver.url}/v1/traces" in out
    assert f"otel trace id: {uuid.UUID(root).hex}" in out


def test_the_store_option_may_follow_the_command(stored_tree):
    path, root = stored_tree
    with Receiver() as receiver:
        assert main(["export-otel", root, "--store", str(path), "--endpoint", receiver.url + "/v1/traces"]) == 0
    assert receiver.spans


def test_an_unreachable_collector_exits_1(stored_tree, capsys):
    path, root = stored_tree
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = main(["--store", str(path), "export-otel", root, "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "0.5"])
    assert code == 1
    assert "did not accept" in capsys.readouterr().err


def test_an_unknown_root_and_a_bad_endpoint_exit_2_naming_the_value(stored_tree, capsys):
    path, _ = stored_tree
    assert main(["--store", str(path), "export-otel", "no-such-root", "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "no-such-root" in capsys.readouterr().err
    assert main(["--store", str(path), "export-otel", "x", "--endpoint", "127.0.0.1:4318"]) == 2
    assert "'127.0.0.1:4318'" in capsys.readouterr().err
