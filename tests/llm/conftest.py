"""Fixtures for the model-layer tests: recorded sleeps and the library's scripted-model fixture."""

from __future__ import annotations

import pytest

from cyber_agent.llm.pytest_plugin import scripted_model  # noqa: F401  (re-exported fixture)


class SleepRecorder:
    """An injectable sleep that records delays instead of waiting, so retry tests are instant."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()
