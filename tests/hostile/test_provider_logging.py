"""The `cyber_agent.*` loggers: quiet by default, and at INFO they say which calls were retried, waited and stopped."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm import ProviderSettings, resolve_llm
from cyber_agent.trace import InMemoryTraceStore
from tests.hostile.hostile_servers import SSE_HEAD, Format, HostileServer

USER = [{"role": "user", "content": "hi"}]


def test_the_library_logs_nothing_unless_the_application_configures_logging():
    code = "import logging, cyber_agent; logging.getLogger('cyber_agent.runner').warning('should stay quiet')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == ""


async def test_info_shows_each_retry_and_the_stop(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    fmt = Format("openai")

    async def cut(_attempt: int, writer: asyncio.StreamWriter) -> None:
        writer.write(SSE_HEAD + fmt.delta("The file "))
        await writer.drain()

    caplog.set_level(logging.INFO, logger="cyber_agent")
    async with HostileServer(cut) as server:
        spec, env = fmt.spec(server)
        resolved = resolve_llm(spec, settings=ProviderSettings(retries=1, backoff_cap=0, stream=True), env=env)
        result = await AgentRunner(trace_store=InMemoryTraceStore(), llm_call=resolved.llm_call).run_result(
            USER, RunConfig(model=resolved.model))
    assert result.status == "failed"
    by_logger = {(r.name, r.levelno) for r in caplog.records}
    assert ("cyber_agent.llm", logging.INFO) in by_logger and ("cyber_agent.runner", logging.INFO) in by_logger
    text = caplog.text
    assert "attempt 1 of 2: stream cut off" in text and f"trace {result.trace.trace_id} failed" in text
