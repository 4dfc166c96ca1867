"""Real browser: JupyterLab + headless Debian Chromium run notebook 07 and use the TraceExplorer.

test_explorer.py drives the explorer's Python state; this one proves its HTML renders and answers
in a real frontend (see browser_lab.py for the server and the browser): notebook 07 is run with
"Run All"; the explorer's page follows what the later cells selected, and a click on a row of its
tree view opens that trace's page, in the browser alone (no widget, no kernel round trip).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_lab import ALL_CELLS_RAN, CHROMIUM, CHROMIUM_ARGS, NOTEBOOK_READY, RUN_ALL, RUN_ALL_SECONDS, STEP_MS
from browser_lab import log_tail, serve_lab
from nb_helpers import REPO

NOTEBOOK = REPO / "notebooks" / "07_explore_a_run.ipynb"

pytestmark = pytest.mark.timeout(180)  # hard bound; the test itself takes about 30 s


def test_the_explorer_follows_the_notebook_and_its_tree_opens_a_page_in_a_real_browser(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with serve_lab(tmp_path, NOTEBOOK) as (url, log), sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(STEP_MS)
            try:
                page.goto(url, wait_until="domcontentloaded", timeout=30_000)
                page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
                page.evaluate(RUN_ALL)
                page.wait_for_function(ALL_CELLS_RAN, timeout=RUN_ALL_SECONDS * 1000, polling=250)

                explorer = page.locator(".cyber-agent-explorer")
                expect(explorer).to_have_count(1)
                explorer.scroll_into_view_if_needed()
                body = explorer.locator(".cyber-agent-explorer-body")
                # The notebook's later cells selected a revised trace: the output followed (display id), both validations.
                expect(body).to_contain_text("validation 2 (criteria)")
                assert not explorer.locator(".jupyter-widgets").count()  # HTML, no widget

                # The tree view inside it runs in the browser: a delegate's row opens its page there.
                tree = explorer.locator(".ca-tree")
                expect(tree).to_have_count(1)
                row = tree.locator(".ca-row").filter(has_text="2 delegate").first
                row.click()
                expect(tree.locator(".ca-page")).to_contain_text("region North")
                expect(tree.locator(".ca-status")).to_contain_text("2 selected")
            except Exception:
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                print(f"screenshot: {tmp_path / 'failure.png'}\njupyter lab log (tail):\n{log_tail(log)}")
                raise
        finally:
            browser.close()
