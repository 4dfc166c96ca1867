"""ReportStepper, headless: click the buttons and assert on widget state (clicks never raise)."""

from __future__ import annotations

from cyber_agent.notebook import ReportStepper
from cyber_agent.notebook.stepper import EMPTY

from nb_helpers import CHILD


def test_steps_walk_brief_report_validations_review(recursive_store):
    store, root = recursive_store
    stepper = ReportStepper(store, root)
    assert [i.kind for i in stepper.items] == ["brief", "report", "validation", "validation", "review"]
    assert all(i.trace_id == CHILD for i in stepper.items)
    assert stepper.label.value == "1 / 5 · brief"
    assert "Sum region East" in stepper.body.value
    assert stepper.prev_button.disabled and not stepper.next_button.disabled

    stepper.next_button.click()
    assert stepper.index == 1 and "East is 152.00" in stepper.body.value
    stepper.next_button.click()
    stepper.next_button.click()
    assert "fail — names the rows used" in stepper.body.value
    assert "rows not listed" in stepper.body.value
    stepper.next_button.click()
    assert stepper.label.value == "5 / 5 · review" and "list the rows" in stepper.body.value
    assert stepper.next_button.disabled
    stepper.next_button.click()  # at the end: nothing moves
    assert stepper.index == 4
    stepper.slider.value = 0
    assert stepper.label.value == "1 / 5 · brief" and stepper.prev_button.disabled


def test_a_legacy_tree_has_no_reports(demo_store, demo_root):
    stepper = ReportStepper(demo_store, demo_root)
    assert stepper.items == [] and stepper.current is None
    assert EMPTY in stepper.body.value and stepper.label.value == "0 / 0"
    assert stepper.next_button.disabled and stepper.prev_button.disabled
    stepper.next_button.click()
    assert stepper.index == 0
