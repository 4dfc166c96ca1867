"""A JupyterLab server and headless Debian Chromium for the real-browser notebook tests.

`serve_lab(tmp_path, notebook)` starts `jupyter lab` on loopback serving a copy of one notebook
(in a temporary root, so autosave never touches the repository's copy) and stops it with its
kernels; the JavaScript snippets below run in the page to wait for the notebook and to Run All.
Debian's /usr/bin/chromium is driven by the `playwright` package (its own browsers are never
downloaded: no `playwright install`); `require_browser()` skips, with the reason, when either is
missing. Imported by module name (pytest puts this folder on sys.path).
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
from contextlib import contextmanager
from pathlib import Path

import pytest

from nb_helpers import REPO

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SERVER_START_SECONDS = 40
RUN_ALL_SECONDS = 60
STEP_MS = 10_000


def require_browser() -> None:
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
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


@contextmanager
def serve_lab(tmp_path: Path, notebook: Path) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on 127.0.0.1 serving a copy of `notebook`; yields (notebook URL with token, server log)."""
    require_browser()
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / notebook.name).write_bytes(notebook.read_bytes())
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
        yield f"http://127.0.0.1:{port}/lab/tree/{notebook.name}?token={token}", log
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
