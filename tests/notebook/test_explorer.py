"""TraceExplorer driven through its Python state: rows, expand/collapse, selection, pages, lazy messages; HTML display."""

from __future__ import annotations

import pytest

from cyber_agent.errors import TraceNotFoundError
from cyber_agent.notebook import TraceExplorer, to_frames
from cyber_agent.notebook.sample_tree import write_sample_tree
from cyber_agent.trace import InMemoryTraceStore

from nb_helpers import REPO

EXPORT = REPO / "data" / "exports" / "recursive_demo.jsonl"


class CountingStore(InMemoryTraceStore):
    """Counts the message reads, to see that only a selected trace's messages are read."""

    def __init__(self) -> None:
        super().__init__()
        self.message_reads: list[str] = []

    async def get_main_path_messages(self, trace_id, head_sequence=None):
        self.message_reads.append(trace_id)
        return await super().get_main_path_messages(trace_id, head_sequence)


@pytest.fixture(scope="module")
def big():
    store = CountingStore()
    return store, write_sample_tree(store, traces=1000, seed=7)


def _rows(explorer: TraceExplorer) -> list[str]:
    return [label.replace("\u00a0", " ") for label, _ in explorer.rows]


def test_a_thousand_trace_tree_opens_on_the_root_and_its_children(big):
    store, sample = big
    store.message_reads.clear()
    explorer = TraceExplorer(store, sample.root_trace_id)
    children = [t for t in explorer.frames.traces.loc[explorer.frames.traces["parent_trace_id"] == sample.root_trace_id,
                                                       "trace_id"]]
    assert explorer.visible == [sample.root_trace_id, *children]
    assert len(explorer.rows) == 1 + len(children) < 20
    assert store.message_reads == []  # nothing is shown yet
    explorer._repr_mimebundle_()
    assert store.message_reads == [sample.root_trace_id]  # only the page shown reads messages
    rows = _rows(explorer)
    assert rows[0].startswith("▾ main · Audit the 2026 revenue")
    assert any(row.startswith("   ▸ 2 delegate") and "(+" in row for row in rows)  # collapsed: what lies below
    assert f"{len(explorer.rows)} of 1000 traces shown" in explorer.status


def test_expand_and_collapse_through_the_buttons(big):
    store, sample = big
    explorer = TraceExplorer(store, sample.root_trace_id)
    second = explorer.visible[2]
    explorer.select(second)  # a click on the row
    assert second not in explorer.expanded
    explorer.toggle()
    grandchildren = explorer.children(second)
    assert explorer.visible[2:3 + len(grandchildren)] == [second, *grandchildren]
    assert _rows(explorer)[2].lstrip().startswith("▾ 2 delegate") and second in explorer.expanded
    explorer.select(grandchildren[0])
    explorer.to_parent()
    assert explorer.selected == second
    explorer.select(grandchildren[0])
    explorer.collapse(second)  # the selection was hidden: it moves up to the collapsed trace
    assert explorer.selected == second and grandchildren[0] not in explorer.visible
    explorer.expand_all()
    assert len(explorer.visible) == 1 + len(explorer.children(sample.root_trace_id)) + explorer._below[second][0]
    explorer.expand_all(sample.root_trace_id)
    assert len(explorer.rows) == 1000
    explorer.collapse_all()
    assert explorer.selected == sample.root_trace_id and len(explorer.visible) == 1 + len(explorer.children(sample.root_trace_id))


def test_a_click_shows_the_page_and_reads_that_traces_messages_once(big):
    store, sample = big
    explorer = TraceExplorer(store, sample.root_trace_id)
    frames = explorer.frames
    judged = frames.validations.groupby("trace_id")["validator_trace_id"].nunique()
    revised = judged[judged == 2].index[0]
    store.message_reads.clear()
    explorer.select(revised)
    assert revised in explorer.visible and explorer.selected == revised
    page = explorer.page_of()
    assert page.section("brief")[0].startswith("objective: ")
    assert page.section("report")[0].startswith("outcome: completed")
    assert page.section("report")[-1].startswith("parent's review: ")
    verdicts = page.section("verdicts")
    assert verdicts[0].startswith("validation 1 (criteria) by ") and "✗ fail" in verdicts[0]
    assert any(line.startswith("validation 2") and "✓ pass" in line for line in verdicts)
    assert page.section("goals")[0].startswith("1. ")
    assert "LLM calls: 2" in page.section("usage")[1]
    assert page.section("messages")[0].startswith("#1 assistant [")
    body = explorer.to_html()
    assert "cyber-agent-explorer-report" in body and "outcome: completed" in body and "✗ fail</span>" in body
    explorer.select(explorer.root_trace_id)
    explorer.select(revised)
    assert store.message_reads == [revised]  # read once, then cached (the root's were read when it opened)


def test_find_selects_and_reveals_matching_traces(big):
    store, sample = big
    explorer = TraceExplorer(store, sample.root_trace_id)
    found = explorer.find("failed")
    assert found is not None and explorer.selected == found and found in explorer.visible
    assert explorer.frames.traces.set_index("trace_id").loc[found, "status"] == "failed"
    assert explorer.page_of().section("report")[0].startswith("error: ")
    assert "[failed]" in _rows(explorer)[explorer.visible.index(found)]
    again = explorer.find("failed")  # the next match, after the selected one
    assert again != found
    explorer.find("region West")
    assert explorer.texts[explorer.selected].title == "region West"
    explorer.find("no such words anywhere")
    assert "nothing matches" in explorer.status and explorer.find("no such words anywhere") is None
    with pytest.raises(TraceNotFoundError):
        explorer.select("not-a-trace")


def test_a_validators_page_gives_its_own_verdict_and_the_export_works_too():
    (root,) = to_frames(EXPORT, messages=False).roots
    explorer = TraceExplorer(EXPORT, root)
    explorer.expand_all()
    validator = next(t for t in explorer.visible if explorer.texts[t].path == "1.1.v1")
    explorer.select(validator)
    verdicts = explorer.page_of().section("verdicts")
    assert verdicts[0] == "validation 1 (criteria) of 1.1: ✗ fail"
    assert _rows(explorer)[explorer.visible.index(validator)].strip() == "· 1.1.v1 validator · ✗ fail · 0/1 criteria"
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}  # no widget: nothing to lose when the kernel is gone
    assert "1.1.v1 validator" in bundle["text/plain"] and "cyber-agent-explorer-static" in bundle["text/html"]
    page = bundle["text/html"]
    assert 'class="ca-tree-box"' in page and "<details" in page  # the tree view, and a static outline beside it
    assert "validation 1 (criteria) of 1.1: ✗ fail" in page  # the selected page is in the saved output
    assert page == explorer.to_html()  # no random ids


def test_frames_without_messages_say_so():
    frames = to_frames(EXPORT, messages=False)
    explorer = TraceExplorer(frames, frames.roots[0])
    assert explorer.page_of().section("messages") == ("(not loaded)",)
    assert "LLM calls: ?" in explorer.page_of().section("usage")[1]


def test_a_recursive_run_with_evidence_checks_displays(tmp_path):
    # Evidence checks are validations without a validator trace: the tree view beside the page must take them.
    from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK
    from cyber_agent.notebook import launch, run_sync

    handle = run_sync(launch(DEMO_TASK, mode="recursive", store=tmp_path, workspace=REPO, progress=False,
                             root_task_anchor=DEMO_ANCHOR))
    handle.wait(timeout=120)
    explorer = TraceExplorer(tmp_path, handle.trace_id)
    assert explorer.frames.validations["validator_trace_id"].isna().any()
    page = explorer._repr_mimebundle_()["text/html"]
    assert 'class="ca-tree-box"' in page and "root main" in page


def test_find_prefers_the_exact_path_then_steps_through_text_matches():
    (root,) = to_frames(EXPORT, messages=False).roots
    explorer = TraceExplorer(EXPORT, root)
    assert explorer.texts[explorer.find("1.2")].path == "1.2"  # not 1.1.v... whose title or path contains "1.2" first
    first = explorer.find("region")
    second = explorer.find("region")  # find again: the next match after the one selected
    assert first is not None and second is not None and first != second
    assert explorer.visible.index(second) > explorer.visible.index(first) or second == explorer.visible[0]
