"""The python examples of docs/experiments.md run as written, from the repository root."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from sweep_helpers import REPO

FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def test_every_python_example_runs():
    blocks = FENCE.findall((REPO / "docs" / "experiments.md").read_text(encoding="utf-8"))
    assert blocks
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    for code in blocks:
        ran = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, f"example failed:\n{code}\n{ran.stderr}"
        assert ran.stdout.strip()
