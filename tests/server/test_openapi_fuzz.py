"""Schemathesis over the served OpenAPI spec of a live server: no 5xx, and the spec is accurate.

Checks: no server error; every status code, content type and response body is the one the
spec documents.

Run through the `schemathesis` command line (its pytest plugin does not support pytest 9),
bounded by examples per operation so it stays around a minute, and with one worker
(hypothesis' lambda descriptions hit a CPython 3.11 AST race when schemathesis runs threads). Half of the generated
`trace_id`s are real traces (a finished one, one waiting for approval), so the fuzzing also
reaches the endpoints' logic and not only their 404s.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_server import ServerProcess, start_run, wait_idle

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of its own: fuzzing creates many traces and must not disturb the other tests."""
    proc = ServerProcess(tmp_path_factory.mktemp("fuzz")).start()
    yield proc
    proc.kill()


@pytest.mark.skipif(not SCHEMATHESIS.exists() and shutil.which("schemathesis") is None,
                    reason="schemathesis is not installed (pip install -e '.[dev]')")
def test_no_generated_request_gets_a_server_error_or_an_undocumented_answer(fuzz_server: ServerProcess, tmp_path: Path):
    with fuzz_server.client() as http:
        known = [start_run(http, "echo"), start_run(http, "deploy: fuzz")]
        for trace_id in known:
            wait_idle(http, trace_id)
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f"[dictionaries.traces]\nvalues = {json.dumps(known)}\n\n"
        '[parameters]\n"path.trace_id" = { dictionary = "traces", probability = 0.5 }\n'
    )
    command = [str(SCHEMATHESIS) if SCHEMATHESIS.exists() else "schemathesis", "--config-file", str(config),
               "run", f"{fuzz_server.url}/openapi.json", "--checks",
               "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
               "--phases", "examples,coverage,fuzzing", "--max-examples", "10", "--seed", "20261129",
               "--generation-database", "none", "--workers", "1", "--no-color", "--request-timeout", "30"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-2000:]}\nserver log:\n{fuzz_server.log()[-4000:]}"
    assert "passed" in result.stdout
    assert "Traceback" not in fuzz_server.log(), fuzz_server.log()[-4000:]
