"""The examples of docs/trace-api.md run, as written, against a live server.

Every ```bash block runs in one bash session (in order, `set -euo pipefail`); a ```python
block whose first line names a file (`# watch.py — ...`) is saved under that name for the
shell to run, and any other ```python block is executed as is. Only the port changes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from live_server import REPO, ServerProcess

DOC = REPO / "docs" / "trace-api.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
NAMED = re.compile(r"^# (\w+\.py)\b")


def blocks() -> list[tuple[str, str]]:
    return FENCE.findall(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_runnable_examples():
    kinds = [kind for kind, _ in blocks()]
    assert kinds.count("bash") >= 2 and "python" in kinds


@pytest.mark.skipif(subprocess.run(["which", "curl"], capture_output=True).returncode != 0, reason="needs curl")
def test_every_example_runs_against_a_live_server(server: ServerProcess, tmp_path: Path):
    shell: list[str] = []
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for kind, code in blocks():
        code = code.replace("127.0.0.1:8000", f"127.0.0.1:{server.port}")
        if kind == "bash":
            shell.append(code)
        elif kind == "python":
            named = NAMED.match(code)
            if named:
                (tmp_path / named.group(1)).write_text(code)
            else:
                ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                                     text=True, timeout=120)
                assert ran.returncode == 0, f"python example failed:\n{code}\n{ran.stderr}"
    script = "set -euo pipefail\n" + "\n".join(shell)
    ran = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    out = ran.stdout
    assert ran.returncode == 0, f"exit {ran.returncode}\nstdout:\n{out}\nstderr:\n{ran.stderr}"
    for expected in [
        "started ", "connected:", "trace_completed", "Top region: North", "agent", "running", "completed",
        "root_completion_criteria was removed", "approved", "not_found", "host_not_allowed", "origin_not_allowed",
    ]:
        assert expected in out, f"{expected!r} missing from the examples' output:\n{out}"
