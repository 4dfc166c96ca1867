"""The sweep progress view follows snapshots and keeps an HTML fallback for saved notebooks."""

from __future__ import annotations

from cyber_agent.experiments import SweepProgress
from cyber_agent.notebook.sweep_view import SweepProgressView


def snapshot(**changes) -> SweepProgress:
    values = {"sweep": "grid", "total": 10, "skipped": 2, "done": 3, "running": 2, "failed": 0, "errors": 1, "cost": 0.25,
              "tokens": 1234, "elapsed": 4.0}
    return SweepProgress(**{**values, **changes})


def test_the_view_follows_the_snapshots():
    view = SweepProgressView()
    assert view.to_text() == "sweep not started"
    view(snapshot())
    assert (view.bar.value, view.bar.max, view.bar.bar_style, view.bar.description) == (5, 10, "info", "grid")
    assert "running</b> 2" in view.line.value and "$0.2500" in view.line.value and "1,234" in view.line.value
    view(snapshot(done=8, running=0))
    assert view.bar.bar_style == "success" and view.bar.value == 10
    view(snapshot(done=7, running=0, failed=1))
    assert view.bar.bar_style == "danger"


def test_the_bundle_holds_the_widget_and_a_text_and_html_fallback():
    view = SweepProgressView(title="mine")
    view(snapshot())
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("grid [") and "grid: 5/10 cells" in bundle["text/html"]
    assert view.bar.description == "mine"
