"""bash_command: run a shell command in the workspace, with a timeout and an output cap.

The command runs as `bash -c` under a small wrapper process
(`cyber_agent/tools/builtin/process_reaper.py`) that is a child subreaper: whatever the command
does to its session or process group (`setsid`, `nohup`, `disown`, a double fork), its orphans
are re-parented to the wrapper, which kills every descendant when the shell exits, times out or
the run is cancelled. Nothing the command started outlives the call. stdout and stderr are
merged in the order they were written. A non-zero exit status is an ordinary result the model
reads; only a timeout is an error result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
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
_CLEANUP_SECONDS = 10.0
"""How long the wrapper may take to kill everything before its group is SIGKILLed from here."""
_REAPER = str(Path(__file__).with_name("process_reaper.py"))


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
    call = await _start(command, workspace)
    output = _CappedBuffer(MAX_OUTPUT_BYTES)
    timed_out = False
    exit_code: int | None = None
    try:
        async with asyncio.timeout(timeout), asyncio.TaskGroup() as group:
            drain = group.create_task(_drain(call.output, output))
            exit_code = await _shell_exit_code(call.status)
            # Let the rest of the command finish writing (a pipeline's earlier stages may outlive the
            # shell by a moment); only a detached background job holds the pipe past the grace.
            _, pending = await asyncio.wait({drain}, timeout=_EOF_GRACE_SECONDS)
            await _end(call)
            if pending:
                call.output_transport.close()
    except TimeoutError:
        timed_out = True
    finally:
        # Runs on timeout and on cancellation alike: nothing the command started outlives the call.
        await _end(call)
        call.output_transport.close()
        call.status_transport.close()
    if exit_code is None:
        exit_code = -signal.SIGKILL  # timed out: the shell was killed
    text = output.text()
    truncated = output.dropped > 0
    meta = {"exit_code": exit_code, "timed_out": timed_out, "truncated": truncated, "output_bytes": output.total}
    if timed_out:
        body = f"{text}\n" if text else ""
        return ToolResult(
            content=f"{body}[timed out after {timeout:g}s; the command and its child processes were killed]",
            is_error=True, metadata=meta,
        )
    body = text if text.endswith("\n") or not text else f"{text}\n"
    return ToolResult(content=f"{body}[exit code: {exit_code}]", metadata=meta)


@dataclass(kw_only=True)
class _Call:
    """The wrapper process of one call and the pipes this call owns."""

    proc: asyncio.subprocess.Process
    control_fd: int | None
    """Write end of the wrapper's stdin; closing it tells the wrapper to kill everything."""
    output: asyncio.StreamReader
    output_transport: asyncio.ReadTransport
    status: asyncio.StreamReader
    status_transport: asyncio.ReadTransport


async def _start(command: str, workspace: Path) -> _Call:
    """Start the wrapper and its shell writing to pipes this call owns.

    asyncio's own PIPE would make `Process.wait()` wait for the pipe to close too, which a
    background job can delay forever, and it cannot be closed once the reader stops reading.
    """
    out_r, out_w = os.pipe()
    status_r, status_w = os.pipe()
    control_r, control_w = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", _REAPER, str(status_w), command, cwd=workspace, stdin=control_r,
            stdout=out_w, stderr=out_w, pass_fds=(status_w,), start_new_session=True,
        )
    except BaseException:
        for fd in (out_r, status_r, control_w):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, status_w, control_r):
            os.close(fd)  # the wrapper has its own copies; EOF comes when every writer is gone
    loop = asyncio.get_running_loop()
    transports: list[asyncio.ReadTransport] = []
    readers: list[asyncio.StreamReader] = []
    pipes = [os.fdopen(fd, "rb", buffering=0) for fd in (out_r, status_r)]
    try:
        for pipe in pipes:
            reader = asyncio.StreamReader(limit=_CHUNK)
            protocol = asyncio.StreamReaderProtocol(reader)
            transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
            readers.append(reader)
            transports.append(transport)
    except BaseException:
        # A cancellation that lands here must not orphan the command that is already running.
        for transport in transports:
            transport.close()
        for pipe in pipes[len(transports):]:
            pipe.close()
        os.close(control_w)
        _kill_group(proc)
        raise
    return _Call(proc=proc, control_fd=control_w, output=readers[0], output_transport=transports[0],
                 status=readers[1], status_transport=transports[1])


async def _shell_exit_code(status: asyncio.StreamReader) -> int | None:
    """Wait for the wrapper's `EXIT_CODE SUBREAPER` line; None if it died without writing one."""
    line = await status.readline()
    try:
        return int(line.split()[0])
    except (IndexError, ValueError):
        return None


async def _end(call: _Call) -> None:
    """Tell the wrapper to kill every descendant and wait for it; kill its group if it hangs."""
    if call.control_fd is not None:
        # Closed once only: a second close could hit a number another call has reused.
        fd, call.control_fd = call.control_fd, None
        os.close(fd)
    if call.proc.returncode is None:
        try:
            async with asyncio.timeout(_CLEANUP_SECONDS):
                await call.proc.wait()
        except TimeoutError:
            _kill_group(call.proc)  # the wrapper is alive, so its group id is still its own
            await call.proc.wait()


async def _drain(reader: asyncio.StreamReader, output: _CappedBuffer) -> None:
    while chunk := await reader.read(_CHUNK):
        output.feed(chunk)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
