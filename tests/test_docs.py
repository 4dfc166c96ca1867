"""Every `path.py:Symbol` reference in docs/ points at a real symbol, and every package has its page."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = re.compile(r"`(cyber_agent/[\w/]+\.py):([\w.]+)`")


def all_references() -> list[tuple[str, str, str]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for file, symbol in REFERENCE.findall(page.read_text(encoding="utf-8")):
            found.append((page.name, file, symbol))
    return found


def test_docs_hold_references():
    assert len(all_references()) > 50


@pytest.mark.parametrize(("page", "file", "symbol"), all_references(), ids=lambda v: str(v))
def test_reference_exists(page, file, symbol):
    assert (ROOT / file).is_file(), f"{page}: {file} does not exist"
    target = importlib.import_module(file[:-3].replace("/", "."))
    for part in symbol.split("."):
        assert hasattr(target, part), f"{page}: {file}:{symbol} does not exist"
        target = getattr(target, part)


def test_readme_has_exactly_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme


def test_decisions_log_exists_and_is_dated():
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    assert re.search(r"^## \d{4}-\d{2}-\d{2}", text, re.M)
