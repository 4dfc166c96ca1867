"""run_sync: the one sync bridge, outside a loop (scripts) and inside one (Jupyter, simulated)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cyber_agent.notebook import in_notebook, run_sync
from cyber_agent.notebook.bridge import background_loop


async def where() -> tuple[str, int]:
    await asyncio.sleep(0)
    return threading.current_thread().name, 42


def test_run_sync_from_plain_code_runs_in_the_calling_thread():
    name, value = run_sync(where())
    assert value == 42
    assert name == threading.current_thread().name


def test_run_sync_inside_a_running_loop_uses_the_background_thread():
    async def cell() -> tuple[str, int]:
        # A notebook cell: a loop is running, so asyncio.run would refuse; run_sync must not.
        return run_sync(where())

    name, value = asyncio.run(cell())
    assert value == 42
    assert name == "cyber-agent-notebook-loop"


def test_run_sync_propagates_exceptions_from_both_paths():
    async def boom() -> None:
        raise ValueError("bad value 7")

    with pytest.raises(ValueError, match="bad value 7"):
        run_sync(boom())

    async def cell() -> None:
        run_sync(boom())

    with pytest.raises(ValueError, match="bad value 7"):
        asyncio.run(cell())


def test_run_sync_on_the_background_loop_refuses_instead_of_deadlocking():
    async def nested() -> None:
        run_sync(where())

    future = asyncio.run_coroutine_threadsafe(nested(), background_loop())
    with pytest.raises(RuntimeError, match="await the coroutine instead"):
        future.result(timeout=10)


def test_the_background_loop_is_one_long_lived_loop():
    assert background_loop() is background_loop()
    assert background_loop().is_running()


def test_not_a_notebook_under_pytest():
    assert in_notebook() is False
