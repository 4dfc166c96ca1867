"""bash_command: exit codes, output cap, timeout and cancellation kill the process group."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cyber_agent.errors import ToolError
from cyber_agent.tools.builtin import builtin_registry
from cyber_agent.tools.builtin.bash import MAX_OUTPUT_BYTES, bash_command
from cyber_agent.tools.context import ToolContext


async def wait_until_dead(pid: int) -> bool:
    """Poll /proc until the process is gone or a zombie (killed but not reaped by init)."""
    for _ in range(1000):
        stat = Path(f"/proc/{pid}/stat")
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        await asyncio.sleep(0.01)
    return False


async def read_pid(path: Path) -> int:
    for _ in range(1000):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never written")


async def test_output_and_exit_code_are_a_normal_result(ctx: ToolContext) -> None:
    result = await bash_command(ctx, "echo out; echo err >&2; exit 3")
    assert not result.is_error
    assert result.content == "out\nerr\n[exit code: 3]"
    assert result.metadata["exit_code"] == 3 and result.metadata["truncated"] is False


async def test_runs_in_the_workspace(ctx: ToolContext, workspace: Path) -> None:
    result = await bash_command(ctx, "pwd")
    assert result.content.splitlines()[0] == str(workspace.resolve())


async def test_output_is_capped_keeping_head_and_tail(ctx: ToolContext) -> None:
    result = await bash_command(ctx, "echo START; head -c 200000 /dev/zero | tr '\\0' x; echo; echo END")
    assert result.metadata["truncated"] is True
    assert result.content.startswith("START\n")
    assert result.content.endswith("END\n[exit code: 0]")
    assert "[... truncated:" in result.content and "bytes omitted of" in result.content
    assert len(result.content.encode()) < MAX_OUTPUT_BYTES + 200


async def test_timeout_kills_the_whole_process_group(ctx: ToolContext, workspace: Path) -> None:
    result = await bash_command(ctx, "sleep 300 & echo $! > child.pid; echo waiting; wait", timeout=0.5)
    assert result.is_error and result.metadata["timed_out"] is True
    assert result.content.startswith("waiting\n")
    assert "[timed out after 0.5s; the command and its child processes were killed]" in result.content
    assert await wait_until_dead(int((workspace / "child.pid").read_text()))


async def test_background_jobs_do_not_outlive_the_command(ctx: ToolContext, workspace: Path) -> None:
    result = await bash_command(ctx, "sleep 300 & echo $! > bg.pid; echo started")
    assert result.content == "started\n[exit code: 0]"
    assert await wait_until_dead(int((workspace / "bg.pid").read_text()))


async def test_cancellation_propagates_and_kills_the_command(ctx: ToolContext, workspace: Path) -> None:
    async with asyncio.TaskGroup() as group:
        task = group.create_task(bash_command(ctx, "echo $$ > shell.pid; sleep 300", timeout=600))
        pid = await read_pid(workspace / "shell.pid")
        task.cancel()
    assert task.cancelled()
    assert await wait_until_dead(pid)


async def test_bad_arguments_are_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="command is empty"):
        await bash_command(ctx, "  ")
    registry = builtin_registry(["bash_command"])
    assert registry.get("bash_command").side_effects  # type: ignore[union-attr]
    result = await registry.execute("bash_command", {"command": "true", "timeout": 9999},
                                    allowed={"bash_command"}, context=ctx)
    assert result.is_error and "- timeout:" in result.content


async def test_timeout_with_endless_output_returns_the_capped_head_and_tail(ctx: ToolContext) -> None:
    result = await bash_command(ctx, "yes", timeout=0.5)
    assert result.is_error and result.metadata["timed_out"] and result.metadata["truncated"]
    assert result.content.startswith("y\ny\n") and "bytes omitted" in result.content


def processes_with(marker: str) -> list[str]:
    """Command lines of live processes whose arguments contain `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in args:
            found.append(f"{cmdline.parent.name}: {b' '.join(args).decode(errors='replace')}")
    return found


@pytest.mark.parametrize(("escape", "marker"), [
    ("setsid sleep {m} > /dev/null 2>&1 &", "61.23451"),
    ("nohup sleep {m} > /dev/null 2>&1 &", "61.23452"),
    ("( (sleep {m} > /dev/null 2>&1 &) & )", "61.23453"),
    ("sleep {m} > /dev/null 2>&1 & disown", "61.23454"),
    ("setsid bash -c 'setsid sleep {m} & sleep {m}' > /dev/null 2>&1 &", "61.23455"),
])
async def test_nothing_started_survives_the_call_whatever_it_does_to_its_session(
        ctx: ToolContext, escape: str, marker: str) -> None:
    result = await bash_command(ctx, escape.format(m=marker) + "\nsleep 0.2; echo started")
    assert result.content == "started\n[exit code: 0]"
    assert processes_with(marker) == []


async def test_a_detached_process_dies_on_timeout_and_on_cancellation(ctx: ToolContext, workspace: Path) -> None:
    result = await bash_command(ctx, "setsid sleep 61.23456 > /dev/null 2>&1 & sleep 300", timeout=0.5)
    assert result.metadata["timed_out"] is True and result.metadata["exit_code"] == -9
    assert processes_with("61.23456") == []
    async with asyncio.TaskGroup() as group:
        task = group.create_task(bash_command(
            ctx, "setsid sleep 61.23457 > /dev/null 2>&1 & echo $! > detached.pid; sleep 300", timeout=600))
        await read_pid(workspace / "detached.pid")
        task.cancel()
    assert task.cancelled()
    assert processes_with("61.23457") == []
