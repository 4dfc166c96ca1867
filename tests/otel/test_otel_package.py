"""The otel package: sorted, complete exports; a clear error without the extra; only the CLI imports it; its doc runs."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import cyber_agent.otel as otel

ROOT = Path(__file__).resolve().parents[2]


def test_exports_are_sorted_and_resolve():
    assert otel.__all__ == sorted(otel.__all__)
    for name in otel.__all__:
        assert getattr(otel, name) is not None


def test_without_the_extra_the_import_error_names_it():
    code = ("import sys; sys.modules['opentelemetry.sdk.trace'] = None\n"
            "try:\n    import cyber_agent.otel\nexcept ImportError as exc:\n    print(exc)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    assert "pip install 'cyber-agent[otel]'" in out.stdout and "opentelemetry.sdk.trace" in out.stdout


def test_only_the_command_line_imports_the_otel_package():
    for path in (ROOT / "cyber_agent").rglob("*.py"):
        if "otel" in path.relative_to(ROOT / "cyber_agent").parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        users = {n for n in names if n.startswith("cyber_agent.otel") or n.startswith("opentelemetry")}
        assert not users or path.relative_to(ROOT).as_posix() == "cyber_agent/cli/_otel.py", f"{path.relative_to(ROOT)} imports {sorted(users)}"


def test_the_after_the_fact_example_of_the_doc_runs(tmp_path):
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "docs" / "otel.md").read_text(encoding="utf-8"), re.M | re.S)
    example = next(block for block in blocks if "asyncio.run(main())" in block)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("132 {'invoke_agent': 16, 'chat': 52, 'execute_tool': 64}")
