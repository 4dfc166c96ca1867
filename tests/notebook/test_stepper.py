"""ReportStepper, headless: move it as the buttons do and assert on its state; its display is saved-safe HTML."""

from __future__ import annotations

import asyncio
import json

import pytest

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.notebook import ReportStepper, export_traces, load_export
from cyber_agent.notebook.stepper import EMPTY
from cyber_agent.trace import FileSystemTraceStore

from nb_helpers import CHILD, REPO


def test_steps_walk_brief_report_validations_review(recursive_store):
    store, root = recursive_store
    stepper = ReportStepper(store, root)
    assert [i.kind for i in stepper.items] == ["brief", "report", "validation", "validation", "review"]
    assert all(i.trace_id == CHILD for i in stepper.items)
    assert stepper.label == "1 / 5 · brief"
    assert "Sum region East" in stepper.body
    assert stepper.at_first and not stepper.at_last

    stepper.next()
    assert stepper.index == 1 and "East is 152.00" in stepper.body
    stepper.next()
    stepper.next()
    assert "fail — names the rows used" in stepper.body
    assert "rows not listed" in stepper.body
    stepper.next()
    assert stepper.label == "5 / 5 · review" and "list the rows" in stepper.body
    assert stepper.at_last
    stepper.next()  # at the end: nothing moves
    assert stepper.index == 4
    stepper.go(0)
    assert stepper.label == "1 / 5 · brief" and stepper.at_first


def test_a_legacy_tree_has_no_reports(demo_store, demo_root):
    stepper = ReportStepper(demo_store, demo_root)
    assert stepper.items == [] and stepper.current is None
    assert EMPTY in stepper.body and stepper.label == "0 / 0"
    assert stepper.at_last and stepper.at_first
    stepper.next()
    assert stepper.index == 0


def test_verdict_filter_and_jump_on_a_small_tree(recursive_store):
    store, root = recursive_store
    stepper = ReportStepper(store, root)
    assert [text for text, _ in stepper.trace_options] == ["delegate 1 · East is 152.00"]
    stepper.filter_verdict("fail")
    assert [i.title for i in stepper.visible] == ["delegate 1 · criteria validation: fail — names the rows used"]
    assert stepper.label == "1 / 1 · validation · fail only" and stepper.at_last
    assert len(stepper.items) == 5  # the filter hides steps, it never drops them
    stepper.filter_verdict("unknown")
    assert stepper.current is None and stepper.label == "0 / 0 · unknown only"
    assert "no steps with verdict unknown" in stepper.body and stepper.to_text() == "no steps with verdict unknown"
    assert stepper.at_first and stepper.at_last
    stepper.jump_to(CHILD)  # nothing of CHILD is visible: the filter goes back to "all"
    assert stepper.verdict == "all" and stepper.label == "1 / 5 · brief"
    with pytest.raises(ValueError, match="no steps for trace"):
        stepper.jump_to("no-such-trace")
    with pytest.raises(ValueError, match="verdict must be one of"):
        stepper.filter_verdict("maybe")


@pytest.fixture(scope="module")
def recursive_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[FileSystemTraceStore, str]:
    """The offline recursive demo (depth 2, one rejection and revision per region, a root validation)."""
    store = FileSystemTraceStore(tmp_path_factory.mktemp("recursive-demo"))

    async def run() -> str:
        config = RunConfig(model="demo", workspace=str(REPO), agent_mode="recursive", root_task_anchor=DEMO_ANCHOR)
        result = await AgentRunner(trace_store=store).run_result([{"role": "user", "content": DEMO_TASK}], config)
        assert result.status == "completed", result.trace.error_message
        return result.trace.trace_id

    return store, asyncio.run(run())


def test_the_recursive_demo_reads_in_protocol_order(recursive_demo):
    store, root = recursive_demo
    stepper = ReportStepper(store, root)
    titles = [item.title for item in stepper.items]
    assert titles[0].startswith("main · root task: Report the revenue")
    assert titles[1].startswith("delegate 1 · brief:")
    # A rejected report, its evidence check and validator, the revision and the pass, in that order.
    east = titles[2:11]
    assert east[0].startswith("explore 1 · brief:") and "region East" in east[0]
    assert east[1] == "explore 1 · report 1 of 2 (completed): Region East: revenue 104.00 from 1 rows"
    # The first report is consistent with the (truncated) read it cites: the check passes it ...
    assert east[2] == "explore 1 · evidence check: pass — claim 1: Region East: revenue 104.00"
    assert any(line.startswith("cited excerpt: ") and "East,Gadget,26,4.00" in line for line in stepper.items[4].lines)
    # ... and the validator, who reads the whole file, fails it.
    assert east[3].startswith("explore 1 · criteria validation: fail — the revenue of region East")
    assert east[4] == "explore 1 · review by delegate 1: revise"
    assert east[5] == "explore 1 · report 2 of 2 (completed): Region East: revenue 152.00 from 3 rows"
    assert east[6] == "explore 1 · evidence check: pass — claim 1: Region East: revenue 152.00"
    assert east[7].startswith("explore 1 · criteria validation: pass")
    assert east[8] == "explore 1 · review by delegate 1: accept"
    assert [i.round for i in stepper.items[2:11]] == [1, 1, 1, 1, 1, 2, 2, 2, 2]
    assert "judged by validator 1" in stepper.items[5].lines and "judged by validator 2" in stepper.items[9].lines
    # The delegate reports after its children; the root's answer and its validation close the walk.
    assert titles[-4] == "delegate 1 · review by main: accept"
    assert titles[-3] == "main · answer: Revenue per region from data/sales.csv (verified by validators):"
    assert "Top region: North with revenue 951.75." in stepper.items[-3].lines
    assert [i.verdict for i in stepper.items[-2:]] == ["pass", "pass"] and "root validation" in titles[-1]

    stepper.filter_verdict("fail")
    assert len(stepper.visible) == 4 and {i.verdict for i in stepper.visible} == {"fail"}
    assert stepper.label == "1 / 4 · validation · fail only"
    stepper.next()
    assert "region North" in stepper.body and "claimed 605.25, recomputed 951.75" in stepper.body
    assert stepper.trace == stepper.current.trace_id  # the picker follows the step shown
    stepper.filter_verdict("all")  # the step shown stays the step shown
    assert stepper.current.verdict == "fail" and "region North" in stepper.current.title

    west = stepper.trace_options[4]
    assert west[0] == "explore 3 · Region West: revenue 753.25 from 5 rows"
    stepper.jump_to(west[1])  # choosing a trace in the dropdown jumps to its brief
    assert stepper.current.trace_id == west[1] and stepper.current.kind == "brief"
    stepper.next()
    assert "report 1 of 2 (completed): Region West: revenue 92.50" in stepper.body
    stepper.go(len(stepper.items) - 1)
    assert stepper.trace == root and stepper.at_last


def test_the_stepper_reads_an_export_like_the_store(recursive_demo, tmp_path):
    store, root = recursive_demo
    loaded = load_export(export_traces(store, root, tmp_path / "recursive.jsonl"))
    assert [i.to_text() for i in ReportStepper(loaded, root).items] == [i.to_text() for i in ReportStepper(store, root).items]


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_the_display_is_html_with_every_step_and_no_widget(recursive_demo):
    store, root = recursive_demo
    stepper = ReportStepper(store, root)
    stepper.filter_verdict("fail")
    stepper.next()
    bundle = stepper._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}  # nothing that needs a kernel or widget state
    page = bundle["text/html"]
    assert page == stepper.to_html()  # no random ids: a rerun saves the same output
    static = page.split('<div class="ca-stepper-static">', 1)[1].split("<script", 1)[0]
    assert static.count("<details") == len(stepper.items)  # every step, collapsible, without a script
    assert static.count("<details open>") == 1 and "▶ " + stepper.current.title.split(" · ")[0] in static
    assert "2 / 4 · validation · fail only" in static
    data = page.split('<script type="application/json" class="ca-data">', 1)[1].split("</script>", 1)[0]
    payload = json.loads(data)
    assert payload["index"] == 1 and payload["verdict"] == "fail" and len(payload["items"]) == len(stepper.items)
    assert payload["traces"] == [list(t) for t in stepper.trace_options]


def test_step_text_cannot_close_the_data_script(recursive_store):
    store, root = recursive_store
    stepper = ReportStepper(store, root)
    object.__setattr__(stepper.items[0], "title", "</script><b>x</b>")
    page = stepper.to_html()
    assert page.count("</script>") == 2  # the data block and the code block; the title's own is escaped
