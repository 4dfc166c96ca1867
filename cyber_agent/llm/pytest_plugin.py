"""Provide a `scripted_model` pytest fixture that fails the test when scripted replies go unused.

Enable it with `pytest_plugins = ["cyber_agent.llm.pytest_plugin"]` in the root conftest, or
import the fixture into any conftest: `from cyber_agent.llm.pytest_plugin import scripted_model`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import pytest

from cyber_agent.llm.fakes import Reply, ScriptedModel

__all__ = ["ScriptedModelFactory", "scripted_model"]


class ScriptedModelFactory(Protocol):
    """Build a ScriptedModel whose replies must all be used by the end of the test."""

    def __call__(self, replies: Iterable[Reply] = (), **options: Any) -> ScriptedModel: ...


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModelFactory]:
    """Yield a ScriptedModel factory; at teardown, every model it built must be used up."""
    created: list[ScriptedModel] = []

    def make(replies: Iterable[Reply] = (), **options: Any) -> ScriptedModel:
        model = ScriptedModel(replies, **options)
        created.append(model)
        return model

    yield make
    for model in created:
        model.assert_all_used()
