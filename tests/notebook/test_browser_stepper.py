"""Real browser: JupyterLab + headless Debian Chromium run notebook 04 and click the ReportStepper.

The headless tests (test_stepper.py) prove the stepper's Python state; this one proves its HTML
and script render and answer clicks in a real frontend (no widget, no kernel round trip): a `jupyter lab` server on loopback,
Debian's /usr/bin/chromium driven by the `playwright` package (its own browsers are never
downloaded: no `playwright install`), notebook 04 run with JupyterLab's "Run All Cells", then
the stepper's trace dropdown and its "next ▶" button are used and the rendered text checked.

Skipped, with the reason, only when /usr/bin/chromium or the playwright package is missing
(`.ci/run` installs chromium as root; playwright is in the dev extra). The notebook is copied
to a temporary root, so JupyterLab's autosave can never touch the repository's copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_lab import (
    ALL_CELLS_RAN,
    CHROMIUM,
    CHROMIUM_ARGS,
    NOTEBOOK_READY,
    RUN_ALL,
    RUN_ALL_SECONDS,
    STEP_MS,
    log_tail,
    serve_lab,
)
from nb_helpers import REPO

NOTEBOOK = REPO / "notebooks" / "04_reports_and_validators.ipynb"

pytestmark = pytest.mark.timeout(150)  # hard bound; the test itself takes about 15 s


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on 127.0.0.1 serving a copy of notebook 04; yields (notebook URL with token, server log)."""
    with serve_lab(tmp_path, NOTEBOOK) as served:
        yield served


def test_next_renders_the_next_report_in_a_real_browser(lab: tuple[str, Path], tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, log = lab
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(STEP_MS)
            try:
                page.goto(url, wait_until="domcontentloaded", timeout=30_000)
                page.wait_for_function(NOTEBOOK_READY, timeout=40_000, polling=250)
                command = page.evaluate(RUN_ALL)
                page.wait_for_function(ALL_CELLS_RAN, timeout=RUN_ALL_SECONDS * 1000, polling=250)

                stepper = page.locator(".cyber-agent-stepper")
                expect(stepper).to_have_count(1)
                stepper.scroll_into_view_if_needed()
                body = stepper.locator(".cyber-agent-stepper-body")
                label = stepper.locator(".cyber-agent-stepper-label")
                # The notebook's later cells drove the stepper to the root validator's verdict, the last step (display id).
                expect(label).to_contain_text("36 / 36")
                expect(body).to_contain_text("main · root validation: pass")

                # Jump with the trace dropdown: explore 1 (region East) opens with its brief.
                picker = stepper.locator("select").first
                picker.select_option(label="explore 1 · Region East: revenue 152.00 from 3 rows")
                expect(label).to_have_text("3 / 36 · brief")
                expect(body).to_contain_text("explore 1 · brief: Compute the revenue")
                before = body.inner_text()

                # next ▶ renders the next step: the first, rejected report.
                next_button = stepper.get_by_role("button", name="next ▶")
                next_button.click()
                expect(label).to_have_text("4 / 36 · report")
                expect(body).to_contain_text("explore 1 · report 1 of 2 (completed): Region East: revenue 104.00 from 1 rows")
                assert body.inner_text() != before
                next_button.click()
                expect(body).to_contain_text("criteria validation: fail")
                expect(body).to_contain_text("claimed 104.00, recomputed 152.00")
                next_button.click()
                next_button.click()
                expect(label).to_have_text("7 / 36 · report")
                expect(body).to_contain_text("report 2 of 2 (completed): Region East: revenue 152.00 from 3 rows")
                stepper.get_by_role("button", name="◀ prev").click()
                expect(label).to_have_text("6 / 36 · review")
                assert command in ("runmenu:run-all", "notebook:run-all-cells")
            except Exception:
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                print(f"screenshot: {tmp_path / 'failure.png'}\njupyter lab log (tail):\n{log_tail(log)}")
                raise
        finally:
            browser.close()
