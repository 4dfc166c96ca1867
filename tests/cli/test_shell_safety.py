"""Shell tools are off in `cyber-agent run` unless `--allow-shell`; the trace's run config records the choice."""

from __future__ import annotations

import asyncio

from cli_procs import ChatServer, clean_env, cli, validated

from cyber_agent.trace import open_store


def _run_config(url: str, trace_id: str) -> dict:
    trace = asyncio.run(open_store(url).get_trace(trace_id))
    assert trace is not None and trace.run_config is not None
    return trace.run_config.config


def test_by_default_the_model_is_not_offered_a_shell_and_nothing_runs(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with ChatServer() as server:
        env = clean_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key")
        done = cli("--store", url, "run", "list the files", "--model", "openai:local-model", "--workspace",
                   str(tmp_path), "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "bash_command" not in server.offered_tools() and "read_file" in server.offered_tools()
    assert not (tmp_path / "shell-ran").exists()
    document = validated(done.stdout)
    assert document["shell_tools"] == "off" and _run_config(url, document["trace_id"])["shell_tools"] == "off"


def test_allow_shell_lets_the_model_run_a_command_and_is_recorded(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with ChatServer(command="echo ran > shell-ran") as server:
        env = clean_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key")
        done = cli("--store", url, "run", "list the files", "--model", "openai:local-model", "--workspace",
                   str(tmp_path), "--allow-shell", "--json", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "bash_command" in server.offered_tools()
    assert (tmp_path / "shell-ran").read_text().strip() == "ran"  # the model's first reply ran a command
    document = validated(done.stdout)
    assert document["shell_tools"] == "allow" and _run_config(url, document["trace_id"])["shell_tools"] == "allow"


def test_run_help_says_shell_tools_are_off_unless_allowed(tmp_path):
    done = cli("run", "--help", cwd=tmp_path)
    text = " ".join(done.stdout.split())
    assert done.returncode == 0 and "--allow-shell" in text and "by default shell tools are off" in text
