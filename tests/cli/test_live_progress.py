"""`cyber-agent run` on a terminal shows live progress; piped or `--quiet` it shows none."""

from __future__ import annotations

from cli_procs import REPO, ChatServer, clean_env, cli, cli_on_pty

from cyber_agent.cli import DEMO_TASK

def test_a_run_on_a_terminal_shows_agents_calls_tokens_cost_and_the_current_tool():
    status, screen = cli_on_pty("--store", "memory:", "run", DEMO_TASK, cwd=REPO)
    assert status == 0, screen
    lines = [part for part in screen.split("\r\x1b[K") if part.startswith("[running]")]
    assert len(lines) > 5, screen[:2000]
    assert any("now: main: read_file" in line for line in lines)  # the tool running at that moment
    assert any("explore 1: read_file" in line for line in lines)  # a sub-agent's tool, beside its parent's
    final = screen.split("\r\x1b[K")[-1].splitlines()[0]
    assert final.startswith("[completed] 5 agents ·") and "LLM calls ·" in final and "tokens ·" in final and "$0.0000" in final
    assert "answer (completed):" in screen  # the report follows the finished line


def test_piped_or_quiet_the_run_prints_no_progress():
    piped = cli("--store", "memory:", "run", "say hi", cwd=REPO)
    assert piped.returncode == 0 and "[running]" not in piped.stderr + piped.stdout
    status, screen = cli_on_pty("--store", "memory:", "run", "say hi", "--quiet", cwd=REPO)
    assert status == 0 and "[running]" not in screen and "answer (completed):" in screen


def test_stream_shows_the_answer_text_as_it_arrives(tmp_path):
    with ChatServer() as server:
        env = clean_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key")
        status, screen = cli_on_pty("--store", "memory:", "run", "say hello", "--model", "openai:local-model",
                                    "--stream", cwd=tmp_path, env=env)
    assert status == 0, screen
    assert server.requests and all(body["stream"] is True for body in server.requests)
    streamed, report = screen.split("answer (completed):", 1)
    assert "[main] Streamed hello from the local model." in streamed  # written while the call ran
    assert "Streamed hello from the local model." in report
    assert "[completed] 1 agent · 1 LLM call · 27 tokens" in streamed
