"""Every result object: a short repr, text/plain + text/html bundles, no random ids, text outside notebooks."""

from __future__ import annotations

import re

from cyber_agent.cli import DEMO_TASK
from cyber_agent.notebook import ReportStepper, launch, load_export, run_sync, to_frames
from cyber_agent.notebook.export import export_traces

from nb_helpers import REPO

RANDOM_ID = re.compile(r"""\bid=|uuid|T_[0-9a-f]{5}""", re.IGNORECASE)


def check(obj, *, stable_html: str | None = None) -> None:
    text = repr(obj)
    assert "\n" not in text and len(text) < 220
    bundle = obj._repr_mimebundle_()
    assert {"text/plain", "text/html"} <= set(bundle)
    assert bundle["text/plain"].strip() and bundle["text/html"].startswith("<")
    assert not RANDOM_ID.search(bundle["text/html"])
    if stable_html is not None:
        assert bundle["text/html"] == stable_html


def test_trace_frames_display(demo_store, demo_root, tmp_path):
    frames = to_frames(demo_store, demo_root)
    again = to_frames(load_export(export_traces(demo_store, demo_root, tmp_path / "e.jsonl")))
    check(frames, stable_html=again.to_html())
    assert repr(frames).startswith("TraceFrames(traces=5, messages=")


def test_run_handle_and_progress_display(capsys):
    handle = run_sync(launch(DEMO_TASK, workspace=REPO, progress=False))
    handle.wait(timeout=120)
    check(handle)
    check(handle.snapshot)
    assert repr(handle).startswith(f"RunHandle(trace_id='{handle.trace_id}', status='completed'")
    assert "answer: Revenue per region" in handle.to_text()
    handle.show()  # outside a notebook: prints the text rendering
    assert "Top region: North" in capsys.readouterr().out


def test_store_view_and_stepper_display(demo_store, demo_root, tmp_path):
    loaded = load_export(export_traces(demo_store, demo_root, tmp_path / "e.jsonl"))
    assert repr(loaded) == f"ReadOnlyTraceStore(source='{tmp_path / 'e.jsonl'}', traces=5)"
    check(loaded)
    assert f"{demo_root} (5 traces): Report the revenue" in loaded.to_text()
    stepper = ReportStepper(loaded, demo_root)
    bundle = stepper._repr_mimebundle_()
    assert bundle["text/plain"] == "no reports in this tree"
    assert "application/vnd.jupyter.widget-view+json" not in bundle  # HTML only: saved notebooks reopen readable
    assert not RANDOM_ID.search(bundle["text/html"])
