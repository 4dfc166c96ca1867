"""bash_command: run a shell command in the workspace, with a timeout and an output cap.

The command runs as `bash -c` in its own process group; when the shell exits, times out or the
run is cancelled, the whole group is killed, so nothing the command started (pipelines,
background jobs) outlives the call; a server meant to stay up needs `setsid` and its own log
file. stdout and stderr are merged in the order they were written. A non-zero exit status is an
ordinary result the model reads; only a timeout is an error result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Annotated

from pydantic import Field

from cyber_agent.errors import ToolError
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolResult

__all__ = ["MAX_OUTPUT_BYTES", "MAX_TIMEOUT_SECONDS", "bash_command"]

MAX_OUTPUT_BYTES = 30_000
"""Most output bytes returned; beyond it the head and tail are kept and the middle is dropped."""
MAX_TIMEOUT_SECONDS = 600
"""Largest timeout a call may ask for."""
_CHUNK = 65536
_EOF_GRACE_SECONDS = 0.5


class _CappedBuffer:
    """Keep the first and last `cap // 2` bytes of a stream and count what is dropped."""

    def __init__(self, cap: int) -> None:
        self._half = cap // 2
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            del self._tail[: max(0, len(self._tail) - self._half)]

    @property
    def dropped(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[... truncated: {self.dropped} bytes omitted of {self.total} ...]\n{tail}"
        return head + tail


async def bash_command(
    ctx: ToolContext, command: str,
    timeout: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_SECONDS)] = 30,
) -> ToolResult:
    """Run a bash command in the workspace and return its combined output and exit code.
    The command runs with `bash -c` in the workspace directory. Output (stdout and stderr,
    merged) is capped; when it is cut, the start and the end are kept.

    Args:
        command: The bash command line to run.
        timeout: Seconds before the command and everything it started are killed (at most 600).
    """
    if not command.strip():
        raise ToolError("command is empty; pass the bash command line to run")
    if not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise ToolError(f"timeout must be in (0, {MAX_TIMEOUT_SECONDS}] seconds, got {timeout}")
    workspace = ctx.workspace.resolve()
    if not workspace.is_dir():
        raise ToolError(f"workspace {workspace} does not exist; the runner must create it first")
    proc, transport, reader = await _start(command, workspace)
    output = _CappedBuffer(MAX_OUTPUT_BYTES)
    timed_out = False
    try:
        async with asyncio.timeout(timeout), asyncio.TaskGroup() as group:
            drain = group.create_task(_drain(reader, output))
            await proc.wait()
            # Let the rest of the group finish writing (a pipeline's earlier stages may outlive the
            # shell by a moment); only a detached background job holds the pipe past the grace.
            _, pending = await asyncio.wait({drain}, timeout=_EOF_GRACE_SECONDS)
            _kill_group(proc)
            if pending:
                transport.close()
    except TimeoutError:
        timed_out = True
    finally:
        # Runs on timeout and on cancellation alike: nothing the command started outlives the call.
        _kill_group(proc)
        transport.close()
        if proc.returncode is None:
            await proc.wait()
    text = output.text()
    truncated = output.dropped > 0
    meta = {"exit_code": proc.returncode, "timed_out": timed_out, "truncated": truncated, "output_bytes": output.total}
    if timed_out:
        body = f"{text}\n" if text else ""
        return ToolResult(
            content=f"{body}[timed out after {timeout:g}s; the command and its child processes were killed]",
            is_error=True, metadata=meta,
        )
    body = text if text.endswith("\n") or not text else f"{text}\n"
    return ToolResult(content=f"{body}[exit code: {proc.returncode}]", metadata=meta)


async def _start(
    command: str, workspace: Path,
) -> tuple[asyncio.subprocess.Process, asyncio.ReadTransport, asyncio.StreamReader]:
    """Start the shell writing to a pipe this call owns.

    asyncio's own PIPE would make `Process.wait()` wait for the pipe to close too, which a
    background job can delay forever, and it cannot be closed once the reader stops reading.
    """
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=workspace, stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd, stderr=write_fd, start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child has its own copy; EOF comes when every writer is gone
    reader = asyncio.StreamReader(limit=_CHUNK)
    try:
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0))
    except BaseException:
        # A cancellation that lands here must not orphan the command that is already running.
        _kill_group(proc)
        raise
    return proc, transport, reader


async def _drain(reader: asyncio.StreamReader, output: _CappedBuffer) -> None:
    while chunk := await reader.read(_CHUNK):
        output.feed(chunk)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
