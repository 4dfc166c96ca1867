"""TreeView / export_html: the data the script draws (subtree totals, marks, search order,
highlights of explain and compare_trees, pages with messages), the static outline and the shared
file; and, in headless Chromium, the files opened from file:// and navigated."""

from __future__ import annotations

import asyncio

import pytest

from cyber_agent.analysis import compare_trees, explain
from cyber_agent.notebook import load_export, to_frames
from cyber_agent.notebook.tree_view import TreeView, atree_view, export_html, tree_view_compare
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocol_records import TaskReport
from cyber_agent.trace.state import Lineage, ProtocolState
from cyber_agent.trace.trace_id import new_root_trace_id, new_sub_trace_id

from nb_helpers import REPO

EXPORT = REPO / "data" / "exports" / "recursive_demo.jsonl"


@pytest.fixture(scope="module")
def source():
    store = load_export(EXPORT)
    return store, to_frames(store).roots[0]


def test_every_node_has_own_and_subtree_totals_that_add_up(source):
    store, root = source
    view = TreeView(store, root)
    frames = to_frames(store, messages=False, events=False)
    by_path = {n["path"]: n for n in view.nodes}
    assert len(view.nodes) == len(frames.traces) == by_path["root"]["sub"][3] == 16
    assert by_path["root"]["sub"][1] == int(frames.traces["total_tokens"].sum())
    assert by_path["root"]["sub"][0] == pytest.approx(float(frames.traces["total_cost"].sum()), abs=1e-5)
    one = by_path["1"]
    below = [n for n in view.nodes if n["path"].startswith("1.")]
    assert one["sub"][1] == one["own"][1] + sum(n["own"][1] for n in below)
    assert one["sub"][3] == 1 + len(below)
    assert all(view.nodes[n["parent"]]["depth"] + 1 == n["depth"] for n in view.nodes if n["parent"] is not None)


def test_find_puts_the_exact_path_before_substring_matches(source):
    store, root = source
    view = TreeView(store, root)
    found = view.find("1.1")
    assert view.nodes[[n["id"] for n in view.nodes].index(found[0])]["path"] == "1.1"
    assert len(found) > 1 and view.find("") == []


def test_marks_become_badges_and_are_searchable(source):
    store, root = source
    child = TreeView(store, root).nodes[2]["id"]
    view = TreeView(store, root, marks={child: ["unsupported claim"]})
    assert [n["badges"] for n in view.nodes if n["id"] == child] == [["unsupported claim"]]
    assert view.find("unsupported claim") == [child]
    assert "unsupported claim" in view.to_html()


def test_the_html_is_stable_and_carries_a_static_outline(source):
    store, root = source
    first, second = TreeView(store, root).to_html(), TreeView(store, root).to_html()
    assert first == second  # no random ids: a notebook stays stable under nbval
    assert '<div class="ca-static"><ul><li><details open><summary>root main' in first
    assert "http://" not in first and "https://" not in first  # nothing fetched


def test_export_html_writes_one_file_and_refuses_a_folder(source, tmp_path):
    store, root = source
    path = export_html(store, root, tmp_path / "out" / "run.html")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "16 traces" in text
    with pytest.raises(IsADirectoryError, match="give a file name"):
        export_html(store, root, tmp_path)


def test_the_shared_file_opens_from_file_url_and_navigates_to_a_childs_report(source, tmp_path):
    from browser_lab import browser

    store, root = source
    path = export_html(store, root, tmp_path / "run.html")
    with browser() as chromium:
        context = chromium.new_context(offline=True)  # no network: everything is in the file
        page = context.new_page()
        page.set_default_timeout(10_000)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_selector(".ca-tree .ca-row")
        assert page.locator(".ca-static").is_hidden()
        assert "16 traces" in page.locator(".ca-budget").inner_text()
        page.locator(".ca-row", has_text="1 delegate").first.locator(".ca-tog").click()  # expand 1
        page.locator(".ca-row", has_text="1.2 explore").first.click()
        headline = page.locator(".ca-page .ca-headline")
        assert headline.inner_text().startswith("1.2 explore")
        child = next(n for n in TreeView(store, root).nodes if n["path"] == "1.2")
        summary = to_frames(store).reports.set_index("trace_id").loc[child["id"], "summary"]
        assert summary and summary in page.locator(".ca-page").inner_text()  # the child's report
        # Breadcrumbs lead back up; search finds an exact path first.
        page.locator(".ca-crumbs a", has_text="root").click()
        assert page.locator(".ca-page .ca-headline").inner_text().startswith("root main")
        page.locator(".ca-find").fill("1.3")
        page.locator(".ca-find").press("Enter")
        assert page.locator(".ca-page .ca-headline").inner_text().startswith("1.3 explore")
        assert "match 1 of " in page.locator(".ca-status").inner_text()
        page.locator(".ca-next").click()
        assert "match 2 of " in page.locator(".ca-status").inner_text()
        page.locator(".ca-prev").click()
        assert page.locator(".ca-page .ca-headline").inner_text().startswith("1.3 explore")
        assert "match 1 of " in page.locator(".ca-status").inner_text()
        page.locator(".ca-prev").click()  # previous from the first wraps to the last match
        last = page.locator(".ca-status").inner_text()
        assert "match " in last and "match 1 of " not in last
        # The node's page carries its last messages.
        messages = page.locator(".ca-page .ca-sec-messages li")
        assert messages.count() > 1 and messages.nth(1).inner_text().startswith("#")
        # Breadcrumbs of a grandchild lead to its parent, then the root.
        page.locator(".ca-find").fill("1.2")
        page.locator(".ca-find").press("Enter")
        assert [a.inner_text() for a in page.locator(".ca-crumbs a").all()] == ["root", "1"]
        page.locator(".ca-crumbs a", has_text="1").click()
        assert page.locator(".ca-page .ca-headline").inner_text().startswith("1 delegate")
        assert errors == []
        context.close()


def _open(chromium, path):
    context = chromium.new_context(offline=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_selector(".ca-tree .ca-row")
    return context, page, errors


def test_the_shared_file_opens_on_the_explained_failure_and_a_comparison_links_counterparts(tmp_path):
    from browser_lab import browser

    store = InMemoryTraceStore()
    root = asyncio.run(_tree(store, "Plan the trip", ["book the flight", "find a hotel"], failed="leaf", grandchild=True))
    found = asyncio.run(explain(store, root))
    explained = export_html(store, root, tmp_path / "explained.html", highlight=found)
    store_b = InMemoryTraceStore()
    root_b = asyncio.run(_tree(store_b, "Plan the trip", ["book the flight", "find a cheap hotel", "rent a car"]))
    compared = tree_view_compare((store, root), (store_b, root_b)).save(tmp_path / "compare.html")
    with browser() as chromium:
        context, page, errors = _open(chromium, explained)
        assert page.locator(".ca-page .ca-headline").inner_text().startswith("1.1 explore")  # opened on the failure
        assert "went wrong here: error at step 1" in page.locator(".ca-page").inner_text()
        assert page.locator(".ca-row.hl-path").count() == 2 and page.locator(".ca-row.hl-fail").count() == 1
        assert "went wrong here (explain): 1" in page.locator(".ca-legend").inner_text()
        assert [a.inner_text() for a in page.locator(".ca-crumbs a").all()] == ["root", "1"]
        assert errors == []
        context.close()

        context, page, errors = _open(chromium, compared)
        left, right = page.locator(".ca-tree-box").nth(0), page.locator(".ca-tree-box").nth(1)
        assert left.locator(".ca-row.hl-relabelled").count() == 1 and right.locator(".ca-row.hl-inserted").count() == 1
        assert "1 inserted" in page.locator(".ca-compare-head").inner_text()
        left.locator(".ca-row", has_text="2 agent").click()  # the relabelled hotel: its counterpart opens on the right
        assert right.locator(".ca-page .ca-headline").inner_text().startswith("2 agent · find a cheap hotel")
        assert right.locator(".ca-row.ca-sel").inner_text().startswith("·2 agent")
        assert errors == []
        context.close()


def test_the_cli_report_command_writes_the_file(demo_dir, tmp_path, capsys):
    from cyber_agent.cli import main

    path, root = demo_dir
    out = tmp_path / "run.html"
    assert main(["report", root, "-o", str(out), "--store", str(path)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert "5 traces" in text and '["messages",["#1 system: ' in text  # every page, with its messages
    assert main(["report", "no-such-root", "-o", str(out), "--store", str(path)]) == 1
    assert "no trace 'no-such-root'" in capsys.readouterr().err


# ---- the records path equals the frames path ------------------------------------------------------
def test_a_view_read_from_the_store_equals_one_built_from_frames(source):
    store, root = source
    direct, framed = TreeView(store, root), TreeView(to_frames(store, messages=False, events=False), root)
    keys = ("id", "parent", "depth", "path", "role", "status", "verdict", "title", "own", "sub")
    assert [[n[k] for k in keys] for n in direct.nodes] == [[n[k] for k in keys] for n in framed.nodes]
    assert any(n["verdict"] == "pass" for n in direct.nodes) and any(n["title"] for n in direct.nodes)
    assert asyncio.run(atree_view(store, root)).nodes == direct.nodes


def test_pages_carry_the_last_messages_and_a_page_past_the_limit_is_built_on_demand(source):
    store, root = source
    view = TreeView(store, root, page_limit=3, messages=5)
    assert len(view.pages_data()) == 3
    index, deep = next((i, n["id"]) for i, n in enumerate(view.nodes) if n["depth"] == 2 and n["role"] != "validator")
    assert str(index) not in view.pages_data()
    lines = view.page(deep).section("messages")
    assert lines[0].startswith("last 5 of ") and lines[1].startswith("#") and len(lines) == 6
    root_lines = TreeView(store, root, messages=0).page(root).section("messages")
    assert root_lines[0].startswith("not read for this view")
    with pytest.raises(KeyError, match="is not in this tree view"):
        view.page("no-such-trace")


def test_sub_trace_ids_are_sent_as_tails_of_their_parents_id(source):
    store, root = source
    view = TreeView(store, root)
    data = view.data()
    assert data["ids"][0] == root and all(t.startswith("@") for t in data["ids"][1:])
    rebuilt: list[str] = []
    for tail, parent in zip(data["ids"], data["parent"]):
        rebuilt.append(rebuilt[parent] + tail if parent >= 0 else tail)
    assert rebuilt == [n["id"] for n in view.nodes]


# ---- highlights: explain and compare ----------------------------------------------------------------
async def _tree(store, task: str, briefs: list[str], *, failed: str | None = None, grandchild: bool = False) -> str:
    root = new_root_trace_id()
    await store.create_trace(Trace(trace_id=root, task=task, status="completed", lineage=Lineage(mode="recursive")))
    await store.add_message(Message(trace_id=root, role="assistant", content="ok", completion_tokens=10))
    for seq, text in enumerate(briefs):
        child = new_sub_trace_id(root, "agent", seq)
        await store.create_trace(Trace(
            trace_id=child, parent_trace_id=root, task=text, status="completed",
            lineage=Lineage(mode="recursive", depth=1, root_trace_id=root, created_by_tool="agent"),
            protocol=ProtocolState(report=TaskReport(outcome="completed", summary="done"))))
        await store.add_message(Message(trace_id=child, role="assistant", content=f"did {text}", completion_tokens=5))
        if grandchild and seq == 0:
            leaf = new_sub_trace_id(child, "agent", 0)
            await store.create_trace(Trace(
                trace_id=leaf, parent_trace_id=child, task=f"part of {text}", agent_type="explore",
                status="failed" if failed == "leaf" else "completed", error_message="tool crashed" if failed else None,
                lineage=Lineage(mode="recursive", depth=2, root_trace_id=root, created_by_tool="agent")))
            await store.add_message(Message(trace_id=leaf, role="assistant", content="trying", completion_tokens=3))
    return root


def test_an_explained_failure_highlights_the_chain_and_opens_on_the_failing_node():
    store = InMemoryTraceStore()
    root = asyncio.run(_tree(store, "Plan the trip", ["book the flight", "find a hotel"], failed="leaf", grandchild=True))
    found = asyncio.run(explain(store, root))
    assert found.kind == "error" and len(found.chain) == 3
    view = TreeView(store, root, highlight=found)
    by_id = {n["id"]: n for n in view.nodes}
    assert [by_id[t]["highlight"] for t in found.chain] == ["path", "path", "fail"]
    assert sum(1 for n in view.nodes if n["highlight"]) == 3
    fail = by_id[found.trace_id]
    assert fail["badges"][0].startswith("went wrong here: error at step ")
    assert view.data()["focus"] == [n["id"] for n in view.nodes].index(found.trace_id)
    assert view.find("went wrong") == [found.trace_id]
    legend = view.data()["legend"]
    assert [row[0] for row in legend] == ["fail", "path"] and legend[1][2] == "2"
    assert "[fail]" in view.to_html()  # the static outline says it too


def test_compare_colours_deleted_inserted_relabelled_and_links_counterparts():
    store_a, store_b = InMemoryTraceStore(), InMemoryTraceStore()
    root_a = asyncio.run(_tree(store_a, "Plan the trip", ["book the flight to rome", "find a hotel near the station",
                                                          "buy travel insurance"]))
    root_b = asyncio.run(_tree(store_b, "Plan the trip", ["book the flight to rome", "find a cheap hotel near the station",
                                                          "rent a car"], grandchild=True))
    frame = asyncio.run(compare_trees(store_a, root_a, store_b, root_b))
    compared = tree_view_compare((store_a, root_a), (store_b, root_b))
    assert compared.counts() == {"matched": 2, "relabelled": 1, "deleted": 1, "inserted": 2}
    assert compared.alignment["kind"].tolist() == frame["kind"].tolist()
    a = {n["path"]: n for n in compared.left.nodes}
    b = {n["path"]: n for n in compared.right.nodes}
    assert (a["1"]["highlight"], a["2"]["highlight"], a["3"]["highlight"]) == (None, "relabelled", "deleted")
    assert [(n["path"], n["highlight"]) for n in compared.right.nodes] == \
        [("root", None), ("1", None), ("1.1", "inserted"), ("2", "relabelled"), ("3", "inserted")]
    # What the other tree has and this one lacks: counted on the nearest node both have.
    assert a["root"]["badges"] == ["+1 inserted below in tree b"] and a["1"]["badges"] == ["+1 inserted below in tree b"]
    assert b["root"]["badges"] == ["+1 deleted below in tree a"]
    pairs = compared.left.data()["pairs"]
    assert pairs[str([n["path"] for n in compared.left.nodes].index("2"))] == b["2"]["id"]
    one = TreeView(store_a, root_a, highlight=frame)  # one tree coloured: side found from the ids
    assert [n["highlight"] for n in one.nodes] == [n["highlight"] for n in compared.left.nodes]
    with pytest.raises(ValueError, match="highlight kind 'odd'"):
        TreeView(store_a, root_a, highlight={root_a: "odd"})
    with pytest.raises(TypeError, match="highlight= takes an explain"):
        TreeView(store_a, root_a, highlight=42)


def test_a_view_read_with_the_view_fields_draws_and_pages_as_one_read_whole(source):
    """The first paint reads `VIEW_FIELDS` without goal trees; pages read their traces' whole records."""
    store, root = source
    whole = asyncio.run(store.read_records([root], messages=False, events=False))
    expected = TreeView(whole, root, messages=0)
    for view in (TreeView(store, root, messages=0), asyncio.run(atree_view(store, root, messages=0))):
        assert view._projected and view.data() == expected.data()
        assert view.pages_data() == expected.pages_data()
        assert any(lines != ["no goals"] for _, sections in view.pages_data().values()
                   for name, lines in sections if name == "goals")
        deep = view.nodes[-1]["id"]
        assert view.page(deep) == expected.page(deep)
