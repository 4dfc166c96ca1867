"""Real browser: JupyterLab + headless Debian Chromium run notebook 07 and use the TraceExplorer.

test_explorer.py drives the explorer's Python state; this one proves the widget renders and
answers in a real frontend (see browser_lab.py for the server and the browser): notebook 07 is
run with "Run All", then the explorer is collapsed, a row selected, expanded with its button,
and a child's page — its report — checked as rendered text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_lab import ALL_CELLS_RAN, CHROMIUM, CHROMIUM_ARGS, NOTEBOOK_READY, RUN_ALL, RUN_ALL_SECONDS, STEP_MS
from browser_lab import log_tail, serve_lab
from nb_helpers import REPO

NOTEBOOK = REPO / "notebooks" / "07_explore_a_run.ipynb"
# Rows are indented with no-break spaces, which option.text keeps: compare with plain spaces.
OPTION_INDEX = "(select, text) => [...select.options].findIndex(o => o.text.replace(/\u00a0/g, ' ').includes(text))"

pytestmark = pytest.mark.timeout(180)  # hard bound; the test itself takes about 30 s


def test_the_explorer_expands_a_node_and_shows_its_report_in_a_real_browser(tmp_path: Path) -> None:
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
                rows = explorer.locator(".cyber-agent-explorer-tree select")
                body = explorer.locator(".cyber-agent-explorer-body")
                # The notebook's later cells selected a revised trace: its page shows both validations.
                expect(body).to_contain_text("validation 2 (criteria)")

                explorer.get_by_role("button", name="collapse all").click()
                expect(rows.locator("option")).to_have_count(6)  # the root and its five delegates
                expect(body).to_contain_text("Audit the 2026 revenue of every region")

                delegate = rows.evaluate(OPTION_INDEX, "2 delegate")
                assert delegate == 2, delegate
                rows.select_option(index=delegate)
                expect(body).to_contain_text("objective: Audit the revenue of region North")
                explorer.get_by_role("button", name="▸ expand").click()
                expect(rows.locator("option")).not_to_have_count(6)
                child = rows.evaluate(OPTION_INDEX, "2.1 explore")
                assert delegate < child <= delegate + 3, child  # right under its parent (after its validator)

                rows.select_option(index=child)
                report = body.locator(".cyber-agent-explorer-report")
                expect(report).to_contain_text("outcome: completed · Check the hardware sales of region North")
                expect(report).to_contain_text("parent's review: ")
                expect(body.locator(".cyber-agent-explorer-verdicts")).to_contain_text("validation 1 (criteria) by 2.1.v1")
            except Exception:
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                print(f"screenshot: {tmp_path / 'failure.png'}\njupyter lab log (tail):\n{log_tail(log)}")
                raise
        finally:
            browser.close()
