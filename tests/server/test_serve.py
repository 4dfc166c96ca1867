"""`cyber-agent serve`: loopback only, reload only on request, clean shutdown, and a FastAPI-free trace package."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cyber_agent.cli import main
from cyber_agent.core.runner import AgentRunner
from cyber_agent.errors import ConfigurationError
from cyber_agent.server import create_app
from cyber_agent.server.serve import reload_enabled
from cyber_agent.trace import InMemoryTraceStore
from live_server import ServerProcess, start_run, trace_of, wait_for


def test_importing_the_trace_package_does_not_import_fastapi():
    code = ("import sys, cyber_agent.trace, cyber_agent.trace.reflection; "
            "bad = [m for m in ('fastapi', 'starlette', 'uvicorn') if m in sys.modules]; "
            "assert not bad, bad")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


@pytest.mark.parametrize(("value", "expected"), [
    (None, False), ("", False), ("false", False), ("1", False), ("yes", False), ("true", True), ("TRUE", True),
])
def test_reload_is_on_only_when_trace_api_reload_is_true(value: str | None, expected: bool):
    assert reload_enabled({} if value is None else {"TRACE_API_RELOAD": value}) is expected


def test_serve_refuses_a_non_loopback_host_and_a_broken_factory(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["serve", "--host", "0.0.0.0", "--store", str(tmp_path / "s")]) == 2
    assert "'0.0.0.0' is not a loopback address" in capsys.readouterr().err
    assert main(["serve", "--runner-factory", "no_such_module:make", "--store", str(tmp_path / "s")]) == 2
    assert "cannot import 'no_such_module'" in capsys.readouterr().err


def test_create_app_needs_exactly_one_runner_on_the_same_store():
    store = InMemoryTraceStore()
    with pytest.raises(ConfigurationError, match="exactly one"):
        create_app(store=store)
    runner = AgentRunner(trace_store=store)
    with pytest.raises(ConfigurationError, match="exactly one"):
        create_app(store=store, runner=runner, runner_factory=lambda s: runner)
    with pytest.raises(ConfigurationError, match="same store"):
        create_app(store=InMemoryTraceStore(), runner=runner)


async def test_shutdown_cancels_background_runs_and_records_them_stopped(fresh_server: ServerProcess):
    server = fresh_server.start()
    with server.client() as http:
        trace_id = start_run(http, "gated: closed-for-good 3")
        wait_for(lambda: trace_of(http, trace_id)["total_messages"] >= 4, "the run to park at its gate")
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status tells the signal.
    assert server.terminate() in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in server.log()
    trace = await server.store().get_trace(trace_id)
    assert trace.status == "stopped" and trace.error_message == "run cancelled"


def test_reload_mode_serves_the_same_app(tmp_path: Path):
    """TRACE_API_RELOAD=true runs uvicorn's reloader with the app rebuilt from the environment."""
    work = tmp_path / "cwd"
    work.mkdir()  # the reloader watches its working directory: keep it away from the repository
    server = ServerProcess(tmp_path, env={"TRACE_API_RELOAD": "true"}, cwd=work)
    try:
        server.start()
        assert "reloader" in server.log().lower()
        with server.client() as http:
            assert http.get("/api/traces").status_code == 200
            assert http.get("/api/traces", headers={"Host": "example.com"}).status_code == 400
    finally:
        server.kill()
