"""Every ```python example of docs/notebook.md runs, as a notebook cell would (top-level `await` allowed).

Each block runs in a fresh namespace with the repository as working directory (examples read
`data/` and pass `workspace="."`); an example asserts what it shows.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re

import pytest

from nb_helpers import REPO

PAGE = REPO / "docs" / "notebook.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _blocks() -> list[tuple[int, str]]:
    text = PAGE.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_page_has_examples():
    assert len(_blocks()) >= 5


@pytest.mark.parametrize(("line", "source"), _blocks(), ids=lambda v: f"line {v}" if isinstance(v, int) else "")
def test_example_runs(line, source, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("CYBER_AGENT_STORE", raising=False)  # examples use in-memory stores
    code = compile(source, f"{PAGE.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, object] = {"__name__": "docs_example"}

    async def run() -> None:
        result = eval(code, namespace)  # noqa: S307 - our own documentation
        if asyncio.iscoroutine(result):
            await result

    asyncio.run(run())
    assert os.getcwd() == str(REPO)
