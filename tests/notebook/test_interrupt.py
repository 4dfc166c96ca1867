"""SIGINT while a caller waits for a run: the subtree stops and one line says so (no kernel; see
test_browser_live.py for the ■ button in JupyterLab). Also: a launch cell run twice."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.errors import RunInterruptedError
from cyber_agent.notebook import RunHandle, launch, run_sync

from nb_helpers import REPO

launch_module = sys.modules["cyber_agent.notebook.launch"]  # the package's `launch` is the function

pytestmark = pytest.mark.timeout(120)

# Each reply of the demo model waits 0.5 s: left alone, the recursive demo (52 calls) runs for ~26 s or more.
SLOW = "demo:latency=0.5"


def _launch() -> RunHandle:
    return run_sync(launch(DEMO_TASK, mode="recursive", model=SLOW, workspace=REPO, progress=False,
                           root_task_anchor=DEMO_ANCHOR))


def _interrupt_when(ready: threading.Event, handle: RunHandle) -> threading.Thread:
    """Send SIGINT to this process once the waiter installed its handler and the run made a call."""

    def send() -> None:
        ready.wait(60)
        while handle.snapshot.llm_calls < 1 and not handle.done:
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def _spy(name: str, monkeypatch: pytest.MonkeyPatch, ready: threading.Event) -> None:
    real: Callable[..., object] = getattr(launch_module, name)

    @contextmanager
    def entered(*args: object) -> Iterator[object]:
        with real(*args) as value:  # type: ignore[attr-defined]
            ready.set()
            yield value

    monkeypatch.setattr(launch_module, name, entered)


def _assert_stopped(error: RunInterruptedError, handle: RunHandle) -> None:
    assert handle.done and handle.status == "stopped"
    assert error.trace_id == handle.trace_id and error.status == "stopped"
    assert str(error).startswith(f"stopped by interrupt: run {handle.trace_id} ended stopped after ")
    assert error._render_traceback_() == [f"RunInterruptedError: {error}"]  # one line in IPython, no traceback
    assert handle.snapshot.llm_calls < 52  # the demo's full run makes 52 calls


def test_sigint_during_wait_stops_the_subtree_and_raises_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    handle, ready = _launch(), threading.Event()
    _spy("sigint_raises", monkeypatch, ready)
    sender = _interrupt_when(ready, handle)
    with pytest.raises(RunInterruptedError) as caught:
        handle.wait(timeout=100)
    sender.join(5)
    _assert_stopped(caught.value, handle)


def test_sigint_during_await_result_stops_the_subtree_not_a_cancelled_error(monkeypatch: pytest.MonkeyPatch) -> None:
    handle, ready = _launch(), threading.Event()
    _spy("sigint_calls", monkeypatch, ready)
    sender = _interrupt_when(ready, handle)

    async def cell() -> None:
        await handle.result()

    with pytest.raises(RunInterruptedError) as caught:
        asyncio.run(cell())
    sender.join(5)
    _assert_stopped(caught.value, handle)


def test_a_cancelled_await_stops_the_run_instead_of_leaving_it_unseen() -> None:
    handle = _launch()

    async def cell() -> None:
        await asyncio.wait_for(handle.result(), timeout=0.01)

    with pytest.raises(TimeoutError):
        asyncio.run(cell())
    result = handle._future.result(60)  # the run was stopped, not left going
    assert result.status == "stopped"
    assert handle.status == "stopped"


def test_a_launch_cell_run_again_stops_its_earlier_run_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(launch_module, "current_cell_id", lambda: "cell-7")
    first = _launch()
    second = _launch()
    out = capsys.readouterr().out
    assert (f"the previous run of this cell, {first.trace_id}, was still running: stopped it (subtree stop, "
            in out)
    first._future.result(60)
    assert first.status == "stopped"
    second.interrupt()
    second._future.result(60)
    third = _launch()
    assert f"the previous run of this cell, {second.trace_id}, had ended stopped" in capsys.readouterr().out
    third.interrupt()
    third._future.result(60)
