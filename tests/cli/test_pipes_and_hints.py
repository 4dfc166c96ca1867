"""The printed "show this trace" hint survives a shell; a reader that stops early ends `show` quietly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from cli_procs import REPO, TIMEOUT, clean_env, cli


def test_the_hint_is_shell_quoted_and_runs_as_printed(tmp_path):
    odd = tmp_path / "runs & co; $HOME 'x'"
    odd.mkdir()
    done = cli("--store", f"sqlite:///{odd / 'r.db'}?busy_timeout=5000", "run", "say hi", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    hint = re.search(r"`(cyber-agent --store .+ show \S+)`\)$", done.stdout.strip()).group(1)
    env = clean_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    shown = subprocess.run(["bash", "-c", hint], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert shown.returncode == 0, shown.stderr
    assert "[main] completed" in shown.stdout and "totals: 1 traces" in shown.stdout


def test_show_into_a_closed_pipe_exits_quietly(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = cli("--store", url, "run", "say hi", "--json", cwd=REPO)
    trace_id = re.search(r'"trace_id":"([^"]+)"', done.stdout).group(1)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written: every write breaks the pipe
    show = subprocess.run([sys.executable, "-m", "cyber_agent.cli", "--store", url, "show", trace_id], cwd=tmp_path,
                          env=clean_env(), stdout=write, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    os.close(write)
    assert show.returncode == 0 and show.stderr == ""  # no BrokenPipeError traceback
    piped = subprocess.run(f"{sys.executable} -m cyber_agent.cli --store {url} show {trace_id} | head -n 1",
                           shell=True, cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert piped.stdout.startswith(trace_id) and "Traceback" not in piped.stderr
