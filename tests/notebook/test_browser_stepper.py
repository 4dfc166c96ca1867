"""Real browser: JupyterLab + headless Debian Chromium run notebook 04 and click the ReportStepper.

The headless widget tests (test_stepper.py) prove the stepper's Python state; this one proves
the widget renders and answers clicks in a real frontend: a `jupyter lab` server on loopback,
Debian's /usr/bin/chromium driven by the `playwright` package (its own browsers are never
downloaded: no `playwright install`), notebook 04 run with JupyterLab's "Run All Cells", then
the stepper's trace dropdown and its "next ▶" button are used and the rendered text checked.

Skipped, with the reason, only when /usr/bin/chromium or the playwright package is missing
(`.ci/run` installs chromium as root; playwright is in the dev extra). The notebook is copied
to a temporary root, so JupyterLab's autosave can never touch the repository's copy.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_helpers import REPO

CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOK = REPO / "notebooks" / "04_reports_and_validators.ipynb"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SERVER_START_SECONDS = 40
RUN_ALL_SECONDS = 60
STEP_MS = 10_000

pytestmark = pytest.mark.timeout(150)  # hard bound; the test itself takes about 15 s


def _requirements() -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install -y --no-install-recommends chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("needs the playwright Python package (pip install 'playwright>=1.40'; never `playwright install`)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on 127.0.0.1 serving a copy of notebook 04; yields (notebook URL with token, server log)."""
    _requirements()
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / NOTEBOOK.name).write_bytes(NOTEBOOK.read_bytes())
    (root / "data").symlink_to(REPO / "data", target_is_directory=True)  # the notebook reads ../data
    jupyter = tmp_path / "jupyter"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(jupyter / "config"), "JUPYTER_DATA_DIR": str(jupyter / "data"),
        "JUPYTER_RUNTIME_DIR": str(jupyter / "runtime"), "IPYTHONDIR": str(jupyter / "ipython"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.pop("MPLBACKEND", None)
    news = jupyter / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no "news?" toast over the page
    token, port = secrets.token_hex(16), _free_port()
    log = tmp_path / "jupyter-lab.log"
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--IdentityProvider.token={token}",
        f"--port={port}", "--port-retries=0", "--ip=127.0.0.1", f"--ServerApp.root_dir={root / 'notebooks'}",
        "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={jupyter / 'workspaces'}",
        f"--LabApp.user_settings_dir={jupyter / 'settings'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with open(log, "wb") as out:
        server = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            if server.poll() is not None:
                pytest.fail(f"jupyter lab exited with {server.returncode}:\n{_log_tail(log)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2) as answer:
                    if answer.status == 200 and "started" in json.load(answer):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer within {SERVER_START_SECONDS} s:\n{_log_tail(log)}")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK.name}?token={token}", log
    finally:
        # The server and its kernels share one process group (start_new_session): stop them all, then make sure.
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=5)


# Runs in the page: the notebook is open, its kernel is idle and every code cell has run.
ALL_CELLS_RAN = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext || !panel.sessionContext.session) return false;
  const kernel = panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.filter(cell => cell.model.type === 'code');
  return !!kernel && kernel.status === 'idle' && cells.length > 0
    && cells.every(cell => cell.model.executionCount !== null && cell.model.executionCount !== undefined);
}"""

RUN_ALL = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.sessionContext.ready;
  // Start from a blank notebook: no stored outputs, no execution counts (so "every cell ran" means this run).
  await app.commands.execute('notebook:clear-all-cell-outputs');
  const command = app.commands.hasCommand('runmenu:run-all') ? 'runmenu:run-all' : 'notebook:run-all-cells';
  await app.commands.execute(command);
  return command;
}"""

NOTEBOOK_READY = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  return !!(panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel
            && panel.sessionContext.session.kernel.status === 'idle' && panel.content && panel.content.widgets.length);
}"""


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
                # The notebook's later cells drove the same widget to the root validator's verdict, the last step.
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
                print(f"screenshot: {tmp_path / 'failure.png'}\njupyter lab log (tail):\n{_log_tail(log)}")
                raise
        finally:
            browser.close()
