"""TreeView / export_html: the data the script draws (subtree totals, marks, search order), the
static outline and the shared file; and, in headless Chromium, the file opened from file://."""

from __future__ import annotations


import pytest

from cyber_agent.notebook import load_export, to_frames
from cyber_agent.notebook.tree_view import TreeView, export_html

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
        assert errors == []
        context.close()


def test_the_cli_report_command_writes_the_file(demo_dir, tmp_path, capsys):
    from cyber_agent.cli import main

    path, root = demo_dir
    out = tmp_path / "run.html"
    assert main(["report", root, "-o", str(out), "--store", str(path)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert "5 traces" in out.read_text(encoding="utf-8")
    assert main(["report", "no-such-root", "-o", str(out), "--store", str(path)]) == 1
    assert "no trace 'no-such-root'" in capsys.readouterr().err
