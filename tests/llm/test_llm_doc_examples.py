"""Every ```python block of docs/llm.md runs as written (offline: the examples use local servers or MockTransport)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "llm.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def python_blocks() -> list[str]:
    return [code for kind, code in FENCE.findall(DOC.read_text(encoding="utf-8")) if kind == "python"]


def test_the_page_has_provider_examples():
    assert len(python_blocks()) >= 5


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    code = python_blocks()[index]
    exec(compile(code, f"{DOC.name}[python block {index}]", "exec"), {"__name__": "__docs__"})
