"""tree_view_pages: a page fetched from the kernel is the embedded page's JSON; errors are JSON the script shows.

The browser half (a click in JupyterLab fetching a page over the kernel's websocket) is
tests/notebook/test_browser_tree_pages.py.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from IPython.core.formatters import PlainTextFormatter

from cyber_agent.notebook import tree_view_pages
from cyber_agent.notebook.sample_tree import write_sample_tree
from cyber_agent.notebook.tree_view import TreeView, export_html
from cyber_agent.notebook.tree_view_pages import KEEP, fetch_attrs, page_text, register

LIMIT = 20


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("sample-pages")
    tree = write_sample_tree(str(folder), traces=60, seed=7)
    return str(folder), tree.root_trace_id


def _index(view: TreeView) -> dict[str, int]:
    return {n["id"]: i for i, n in enumerate(view.nodes)}


def test_an_embedded_nodes_page_text_is_its_embedded_json(sample: tuple[str, str]) -> None:
    store, root = sample
    view = TreeView(store, root, page_limit=LIMIT)
    embedded = view.pages_data()
    assert len(embedded) == LIMIT < len(view)
    register("embedded", view)
    for trace_id, i in _index(view).items():
        if str(i) in embedded:
            assert json.loads(page_text("embedded", trace_id)) == embedded[str(i)]


def test_a_node_beyond_the_limit_gets_the_page_a_full_view_embeds(sample: tuple[str, str]) -> None:
    store, root = sample
    view = TreeView(store, root, page_limit=LIMIT)
    full = TreeView(store, root, page_limit=None).pages_data()
    register("beyond", view)
    missing = [(t, i) for t, i in _index(view).items() if str(i) not in view.pages_data()]
    assert len(missing) == len(view) - LIMIT
    for trace_id, i in missing[-3:]:
        page = json.loads(page_text("beyond", trace_id))
        assert page == full[str(i)]
        assert page[0].startswith(view.nodes[i]["path"] + " ")
        assert [name for name, _ in page[1]] == ["brief", "report", "verdicts", "goals", "usage", "messages"]


def test_the_kernel_formats_it_as_the_json_itself(sample: tuple[str, str]) -> None:
    # What `user_expressions` sends as text/plain: IPython's plain-text formatter of the value.
    store, root = sample
    register("plain", TreeView(store, root, page_limit=LIMIT))
    text = page_text("plain", root)
    assert PlainTextFormatter()(text) == str(text) and json.loads(PlainTextFormatter()(text))[0].startswith("root ")


def test_an_unknown_view_or_trace_is_a_clear_error_text(sample: tuple[str, str]) -> None:
    store, root = sample
    register("known", TreeView(store, root, page_limit=LIMIT))
    gone = json.loads(page_text("never-shown", root))
    assert "no longer holds the view" in gone["error"] and f"TreeView.page({root!r})" in gone["error"]
    wrong = json.loads(page_text("known", "no-such-trace"))
    assert "'no-such-trace' is not in this tree view" in wrong["error"]


def test_the_registry_holds_the_latest_views_and_any_still_referenced(sample: tuple[str, str]) -> None:
    store, root = sample
    kept = TreeView(store, root, page_limit=LIMIT)
    register("kept", kept)
    register("dropped", TreeView(store, root, page_limit=LIMIT))
    for n in range(KEEP):
        register(f"newer-{n}", TreeView(store, root, page_limit=1))
    gc.collect()
    assert "error" not in json.loads(page_text("kept", root))  # held by this test
    assert "error" in json.loads(page_text("dropped", root))  # evicted and nothing else holds it
    assert "error" not in json.loads(page_text(f"newer-{KEEP - 1}", root))


def test_only_a_kernel_view_with_pages_left_out_fetches(sample: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    store, root = sample
    view = TreeView(store, root, page_limit=LIMIT)
    assert tree_view_pages.kernel_id() is None and "data-kernel" not in view.to_html()  # no kernel here
    monkeypatch.setattr(tree_view_pages, "kernel_id", lambda: "0f1e2d3c-aaaa-bbbb-cccc-000000000000")
    shown = view.to_html()
    assert 'data-kernel="0f1e2d3c-aaaa-bbbb-cccc-000000000000"' in shown and "window.__caKernel" in shown
    key = shown.split('data-view="', 1)[1].split('"', 1)[0]
    assert key == shown.split('id="', 1)[1].split('"', 1)[0]  # the box id names the view in the registry
    assert "error" not in json.loads(page_text(key, view.nodes[-1]["id"]))
    assert 'data-view="live-x"' in view.to_html(key="live-x")
    assert fetch_attrs(TreeView(store, root, page_limit=None), "all") == ""  # every page embedded
    assert "data-kernel" not in view.to_html(fetch=False) and "data-kernel" not in view.to_document()
    assert "data-kernel" not in export_html(store, root, tmp_path / "run.html").read_text()


def test_a_kernel_view_saved_to_a_file_shows_the_note_and_never_throws(sample: tuple[str, str],
                                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The HTML of a view displayed in a kernel, opened where no Jupyter server is (file://): the note, no error.
    from browser_lab import browser

    store, root = sample
    monkeypatch.setattr(tree_view_pages, "kernel_id", lambda: "0f1e2d3c-aaaa-bbbb-cccc-000000000000")
    view = TreeView(store, root, page_limit=LIMIT)
    left_out = [i for i in range(len(view)) if str(i) not in view.pages_data()][-1]
    path = tmp_path / "saved.html"
    path.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{view.to_html()}</body></html>')
    with browser() as chromium:
        page = chromium.new_context(offline=True).new_page()
        page.set_default_timeout(10_000)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_selector(".ca-tree .ca-row")
        page.locator(".ca-find").fill(view.nodes[left_out]["path"])
        page.locator(".ca-find").press("Enter")
        note = page.locator(".ca-page .ca-nopage")
        note.wait_for()
        assert "no Jupyter server to ask here" in note.inner_text() and "TreeView.page(" in note.inner_text()
        page.locator(".ca-find").fill("root")
        page.locator(".ca-find").press("Enter")  # an embedded page still shows
        assert page.locator(".ca-page .ca-headline").inner_text().startswith("root ")
        assert errors == []


def test_a_comparison_in_a_kernel_fetches_and_its_saved_file_does_not(sample: tuple[str, str],
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    from cyber_agent.notebook.tree_view import tree_view_compare

    store, root = sample
    monkeypatch.setattr(tree_view_pages, "kernel_id", lambda: "0f1e2d3c-aaaa-bbbb-cccc-000000000000")
    compare = tree_view_compare((store, root), (store, root), page_limit=LIMIT)
    assert compare.to_html().count('data-kernel="0f1e2d3c-aaaa-bbbb-cccc-000000000000"') == 2  # both views ask
    assert "data-kernel" not in compare.to_document()
    assert "data-kernel" not in compare.save(tmp_path / "compare.html").read_text()
