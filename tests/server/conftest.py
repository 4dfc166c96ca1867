"""Fixtures: live Trace API servers (see live_server.py) shared by the server tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from live_server import ServerProcess


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One live server shared by the tests that do not kill it."""
    proc = ServerProcess(tmp_path_factory.mktemp("server")).start()
    yield proc
    proc.kill()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of this test alone (the test may kill and restart it)."""
    proc = ServerProcess(tmp_path)
    yield proc
    proc.kill()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


