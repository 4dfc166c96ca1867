"""A JupyterLab server and headless Debian Chromium for the real-browser notebook tests.

`lab_server(root, work)` starts `jupyter lab` on loopback over a temporary notebook root (so
autosave never touches the repository's notebooks; `notebook_root` makes one) with its own
config, data, runtime, settings and workspace folders, and stops it with its kernels (one
process group); `serve_lab(tmp_path, notebook)` is the one-notebook shorthand. `browser()`
drives Debian's /usr/bin/chromium with the `playwright` package (its own browsers are never
downloaded: no `playwright install`); `require_browser()` skips, with the reason, when either is
missing (`.ci/run` installs chromium as root; playwright is in the dev extra). The JavaScript
snippets below run in the page to wait for the notebook and to Run All. Imported by module name
(pytest puts this folder on sys.path).
"""

from __future__ import annotations

import json
import os
import shutil
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nb_helpers import REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SERVER_START_SECONDS = 40
RUN_ALL_SECONDS = 60
STEP_MS = 10_000


def require_browser() -> None:
    """Skip unless /usr/bin/chromium and the playwright package are there."""
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


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of the server log (for a failure message)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


@dataclass(frozen=True)
class Lab:
    """A running server: where it is, its token, its log."""

    base: str
    token: str
    log: Path

    def url(self, notebook: str) -> str:
        """The URL that opens `notebook` (a path under the server's root)."""
        return f"{self.base}/lab/tree/{notebook}?token={self.token}"


@contextmanager
def lab_server(root: Path, work: Path, *, trusted: Sequence[str] = ()) -> Iterator[Lab]:
    """Serve `root` (notebooks/, beside a data/ link) with JupyterLab; sign the `trusted` notebooks first.

    A notebook is trusted when its signature is in the server's database (as after you save it in
    JupyterLab); a fresh clone is not, and JupyterLab then shows a widget output's text/html.
    """
    require_browser()
    jupyter = work / "jupyter"
    if trusted:
        import nbformat
        from nbformat.sign import NotebookNotary

        (jupyter / "data").mkdir(parents=True)
        notary = NotebookNotary(data_dir=str(jupyter / "data"))
        for name in trusted:
            notary.sign(nbformat.read(root / "notebooks" / name, as_version=4))
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
    log = work / "jupyter-lab.log"
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
                pytest.fail(f"jupyter lab exited with {server.returncode}:\n{log_tail(log)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2) as answer:
                    if answer.status == 200 and "started" in json.load(answer):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer within {SERVER_START_SECONDS} s:\n{log_tail(log)}")
            time.sleep(0.3)
        yield Lab(base=f"http://127.0.0.1:{port}", token=token, log=log)
    finally:
        # The server and its kernels share one process group (start_new_session): stop them all, then make sure.
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=5)


def notebook_root(work: Path, *notebooks: Path) -> Path:
    """A temporary repository root: copies of `notebooks` in notebooks/ and of data/ (under 1 MB).

    A copy, not a link: a run whose workspace is this root reads data/sales.csv, and the workspace
    tools refuse a path that resolves outside the workspace (a link to the real repository does)."""
    root = work / "repo"
    (root / "notebooks").mkdir(parents=True)
    for notebook in notebooks:
        (root / "notebooks" / notebook.name).write_bytes(notebook.read_bytes())
    shutil.copytree(REPO / "data", root / "data")  # notebooks read ../data
    return root


@contextmanager
def serve_lab(tmp_path: Path, notebook: Path) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server serving a copy of `notebook`; yields (notebook URL with token, server log)."""
    with lab_server(notebook_root(tmp_path, notebook), tmp_path) as server:
        yield server.url(notebook.name), server.log


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium (playwright `Browser`)."""
    from playwright.sync_api import sync_playwright

    require_browser()
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


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

# Run the code cell at `index` (its position among all cells) of the current notebook; return at once (the
# command's promise ends with the cell).
RUN_CELL = """(index) => {
  const app = window.jupyterapp;
  app.shell.currentWidget.content.activeCellIndex = index;
  void app.commands.execute('notebook:run-cell');
}"""

# The cell at `index` has finished (its execution count is set, its prompt no longer `[*]`).
CELL_DONE = """(index) => {
  const cell = window.jupyterapp.shell.currentWidget.content.widgets[index];
  return cell.model.executionCount !== null && !cell.node.querySelector('.jp-InputPrompt').textContent.includes('*');
}"""


def run_cell(page: Any, index: int, seconds: float = 60) -> None:
    """Run the code cell at `index` of the notebook open in `page` and wait until it has finished."""
    page.evaluate(RUN_CELL, index)
    page.wait_for_function(CELL_DONE, arg=index, timeout=seconds * 1000, polling=200)


NOTEBOOK_READY = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  return !!(panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel
            && panel.sessionContext.session.kernel.status === 'idle' && panel.content && panel.content.widgets.length);
}"""
