"""Live outputs are display-id HTML (#36 "saved means readable"): no widget, one update moves every copy.

`IPython.display.display` / `update_display` are replaced by recorders: what a view sends is
what the frontend keeps, so what a notebook saves at any moment. The real-browser checks are
`test_browser_live.py` and `test_browser_tree_live.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import IPython.display
import pytest

from cyber_agent.experiments import SweepProgress
from cyber_agent.notebook.display import LiveDisplay, html_bar
from cyber_agent.notebook.progress import ProgressTracker
from cyber_agent.notebook.progress_view import HtmlView
from cyber_agent.notebook.sweep_view import SweepProgressView

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class Frontend:
    """Records displays and updates by display id, and keeps the latest bundle of each id (what JupyterLab saves)."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, dict[str, Any]]] = []
        self.updates: list[tuple[str, dict[str, Any]]] = []

    def display(self, bundle: Any, raw: bool = False, display_id: str | None = None, **_: Any) -> None:
        assert raw and isinstance(bundle, dict) and display_id
        self.shown.append((display_id, bundle))

    def update_display(self, bundle: Any, raw: bool = False, display_id: str | None = None, **_: Any) -> None:
        assert raw and isinstance(bundle, dict) and display_id
        self.updates.append((display_id, bundle))

    def saved(self) -> list[dict[str, Any]]:
        """Each output's bundle after every update so far."""
        latest = dict(self.shown)
        for display_id, bundle in self.updates:
            latest[display_id] = bundle
        return [latest[display_id] for display_id, _ in self.shown]


@pytest.fixture
def frontend(monkeypatch: pytest.MonkeyPatch) -> Frontend:
    seen = Frontend()
    monkeypatch.setattr(IPython.display, "display", seen.display)
    monkeypatch.setattr(IPython.display, "update_display", seen.update_display)
    return seen


def test_one_update_moves_every_output_of_the_object(frontend: Frontend) -> None:
    live = LiveDisplay()
    live.update({"text/plain": "before any output"})
    assert frontend.updates == []  # nothing shown yet: nothing to move
    live.show({"text/plain": "a"})
    live.show({"text/plain": "a"})
    live.update({"text/plain": "b"})
    assert [d for d, _ in frontend.shown] == [live.display_id] * 2
    assert frontend.updates == [(live.display_id, {"text/plain": "b"})]
    assert frontend.saved() == [{"text/plain": "b"}] * 2
    assert LiveDisplay().display_id != live.display_id


def test_updates_closer_than_the_interval_are_held_and_the_latest_is_sent(frontend: Frontend) -> None:
    live = LiveDisplay(every=3600)
    live.show({"text/plain": "0"})
    live.update({"text/plain": "1"})  # the first update goes at once
    live.update({"text/plain": "2"})
    live.update({"text/plain": "3"})
    assert [b["text/plain"] for _, b in frontend.updates] == ["1"]  # no loop here: held until the next one
    live.update({"text/plain": "final"}, force=True)
    assert [b["text/plain"] for _, b in frontend.updates] == ["1", "final"]


def test_a_held_update_is_sent_by_the_loop_when_the_interval_is_over(frontend: Frontend) -> None:
    live = LiveDisplay(every=0.05)

    async def main() -> None:
        live.show({"text/plain": "0"})
        live.update({"text/plain": "1"})
        live.update({"text/plain": "2"})
        live.update({"text/plain": "3"})
        for _ in range(100):  # until the loop sent the held one (bounded: a missing flush fails below)
            if len(frontend.updates) == 2:
                break
            await asyncio.sleep(0.02)

    asyncio.run(main())
    assert [b["text/plain"] for _, b in frontend.updates] == ["1", "3"]


def test_the_progress_view_is_html_and_its_final_snapshot_is_what_stays(frontend: Frontend) -> None:
    tracker = ProgressTracker()
    view = HtmlView(tracker.snapshot())
    view._ipython_display_()
    ((_, first),) = frontend.shown
    assert WIDGET_VIEW not in first and set(first) == {"text/plain", "text/html"}
    assert first["text/plain"].startswith("[starting] 0 agents") and first["text/html"].startswith("<table")
    tracker.status = "completed"
    view.update(tracker.snapshot())
    view.update(tracker.snapshot())  # within 0.1 s: held
    view.close(tracker.snapshot())  # the final one goes at once
    (saved,) = frontend.saved()
    assert saved["text/plain"].startswith("[completed]") and "<td style=\"text-align:left;padding:2px 10px\">completed" in saved["text/html"]
    assert not [b for _, b in frontend.updates if WIDGET_VIEW in b]


def sweep(**changes: Any) -> SweepProgress:
    values = {"sweep": "grid", "total": 10, "skipped": 2, "done": 3, "running": 2, "failed": 0, "errors": 1, "cost": 0.25,
              "tokens": 1234, "elapsed": 4.0}
    return SweepProgress(**{**values, **changes})


def test_the_sweep_view_follows_the_snapshots_as_html(frontend: Frontend) -> None:
    view = SweepProgressView()
    assert view.to_text() == "sweep not started"
    view._ipython_display_()
    view(sweep())
    (live,) = frontend.saved()
    assert "running</b> 2" in live["text/html"] and "$0.2500" in live["text/html"] and "1,234" in live["text/html"]
    assert "width:50.0%" in live["text/html"] and "#1565c0" in live["text/html"]  # 5 of 10, running: blue
    view(sweep(done=7, running=1))  # within 0.1 s: held back
    view(sweep(done=7, running=0, failed=1))  # finished: sent at once, failed: red
    (final,) = frontend.saved()
    assert "grid: 10/10 cells" in final["text/html"] and "#c62828" in final["text/html"]
    assert final["text/plain"].startswith("grid [") and WIDGET_VIEW not in final


def test_the_sweep_view_title_names_the_bar(frontend: Frontend) -> None:
    view = SweepProgressView(title="mine")
    view(sweep(done=8, running=0))
    assert ">mine<" in view.to_html() and "grid: 10/10 cells" in view.to_html()


def test_an_html_bar_is_clamped_and_escaped() -> None:
    assert "width:100.0%" in html_bar(12, 10, label="<x>") and "&lt;x&gt;" in html_bar(1, 2, label="<x>")
    assert "width:0.0%" in html_bar(0, 0, label="empty")


def test_the_live_tree_sends_live_snapshots_then_the_final_one(frontend: Frontend, monkeypatch: pytest.MonkeyPatch) -> None:
    from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
    from cyber_agent.notebook import launch, run_sync
    from cyber_agent.notebook import tree_view_live

    from nb_helpers import REPO

    monkeypatch.setattr(tree_view_live, "in_notebook", lambda: True)
    handle = run_sync(launch(DEMO_TASK, mode="recursive", model="demo:latency=0.05", workspace=REPO,
                             root_task_anchor=DEMO_ANCHOR, progress=False))
    view = tree_view_live.live_tree(handle, interval=0.2)
    view._ipython_display_()
    ((_, first),) = frontend.shown
    assert "live · " in first["text/html"] and 'class="ca-tree-box"' in first["text/html"]
    assert handle.wait(timeout=120).status == "completed"
    live = [b for _, b in frontend.updates if "live · " in b["text/html"]]
    assert live and any("ca-run" in b["text/html"] or " running · " in b["text/plain"] for b in live)
    (saved,) = frontend.saved()
    assert "live · " not in saved["text/html"] and "live · " not in saved["text/plain"]  # the final static view
    assert saved == {"text/plain": view.to_text(), "text/html": view.to_html()} and len(view.view) == 16
    assert not [b for _, b in [*frontend.shown, *frontend.updates] if WIDGET_VIEW in b]
