"""Start a `store_workers.py` process and collect the JSON lines it printed (the multi-process store tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("store_workers.py")
ROOT_DIR = Path(__file__).resolve().parents[2]


def start_worker(*args: str) -> subprocess.Popen[bytes]:
    """A worker process running `store_workers.py ARGS` with this checkout first on its path."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT_DIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT_DIR, env=env)


def finish_worker(proc: subprocess.Popen[bytes], timeout: float) -> list[dict[str, Any]]:
    """Wait for a worker that must succeed; return the JSON lines it printed."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode()[-3000:]
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]
