"""Run the offline recursive demo in forked processes and kill each one with SIGKILL mid-run.

    python tests/reliability/kill_driver.py JOBS_JSON PARALLEL

JOBS_JSON is a list of `{"seed", "dir", "kill_after", "delay"}` (optionally `"suicide_after": k`:
the child kills itself right after its k-th assistant message is acknowledged). This process imports the
library once, then forks one child per job (at most PARALLEL at a time), so twenty kills cost
one interpreter start. Each child runs the same run as `cyber-agent --store DIR demo` on a
FileSystemTraceStore whose `add_message` writes the message id to a pipe once it has returned
(an acknowledged message). This process reads the pipes and sends SIGKILL to a child
`delay` seconds after its `kill_after`-th acknowledgement. It prints one JSON object per job:
seed, the acknowledged ids, whether the kill landed, and the exit status.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STUCK_AFTER = 90.0
"""Seconds after which a child that neither finished nor reached its kill point is killed as stuck."""

for _name in [n for n in os.environ if n.startswith("AGENT_")]:
    del os.environ[_name]  # the demo's own defaults, whatever the calling shell set

from cyber_agent.cli import DEMO_ANCHOR, DEMO_TASK  # noqa: E402
from cyber_agent.core.config import RunConfig  # noqa: E402
from cyber_agent.core.runner import AgentRunner  # noqa: E402
from cyber_agent.trace import FileSystemTraceStore, Message  # noqa: E402


def _child(directory: str, ack_fd: int, suicide_after: int | None) -> None:
    """Run the recursive demo as the CLI does; acknowledge every persisted message on `ack_fd`.

    With `suicide_after` = k the child kills itself right after acknowledging its k-th
    assistant message: a kill at exactly that point, not a race with the parent.
    """
    answers = 0

    class AckingStore(FileSystemTraceStore):
        async def add_message(self, message: Message) -> str:
            nonlocal answers
            message_id = await super().add_message(message)
            os.write(ack_fd, f"{message_id}\n".encode())  # one short write: atomic on a pipe
            answers += message.role == "assistant"
            if suicide_after is not None and answers == suicide_after:
                os.kill(os.getpid(), signal.SIGKILL)
            return message_id

    async def demo() -> None:
        runner = AgentRunner(trace_store=AckingStore(directory), workspace=str(REPO))
        config = RunConfig(model="demo", max_iterations=30, workspace=str(REPO), agent_mode="recursive",
                           root_task_anchor=DEMO_ANCHOR)
        await runner.run_result([{"role": "user", "content": DEMO_TASK}], config)

    asyncio.run(demo())


class _Running:
    def __init__(self, job: dict[str, Any], pid: int, fd: int) -> None:
        self.job, self.pid, self.fd = job, pid, fd
        self.buffer = b""
        self.acked: list[str] = []
        self.kill_at: float | None = None
        self.killed = False
        self.deadline = time.monotonic() + STUCK_AFTER


def main(jobs: list[dict[str, Any]], parallel: int) -> None:
    """Fork, watch and kill every job; print one JSON line per job."""
    pending = list(jobs)
    selector = selectors.DefaultSelector()
    running: dict[int, _Running] = {}
    while pending or running:
        while pending and len(running) < parallel:
            job = pending.pop(0)
            read_fd, write_fd = os.pipe()
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:  # the child: run the demo and leave without running the parent's cleanup
                os.close(read_fd)
                code = 0
                try:
                    _child(job["dir"], write_fd, job.get("suicide_after"))
                except BaseException:  # noqa: BLE001 - a crash of the demo is reported by the exit code
                    code = 3
                os._exit(code)
            os.close(write_fd)
            state = running[read_fd] = _Running(job, pid, read_fd)
            if job["kill_after"] <= 0:
                state.kill_at = time.monotonic() + job["delay"]
            selector.register(read_fd, selectors.EVENT_READ)
        timeout = min((min(r.kill_at or r.deadline, r.deadline) for r in running.values() if not r.killed), default=None)
        events = selector.select(None if timeout is None else max(0.0, timeout - time.monotonic()))
        now = time.monotonic()
        for key, _ in events:
            state = running[key.fd]
            chunk = os.read(key.fd, 65536)
            if chunk:
                state.buffer += chunk
                *lines, state.buffer = state.buffer.split(b"\n")
                state.acked += [line.decode() for line in lines]
                if state.kill_at is None and len(state.acked) >= state.job["kill_after"]:
                    state.kill_at = now + state.job["delay"]
                continue
            selector.unregister(key.fd)  # EOF: the child is gone (killed or done)
            os.close(key.fd)
            _, status = os.waitpid(state.pid, 0)
            del running[key.fd]
            print(json.dumps({"seed": state.job["seed"], "dir": state.job["dir"], "acked": state.acked,
                              "killed": state.killed, "kill_after": state.job["kill_after"],
                              "stuck": state.killed and state.kill_at is None,
                              "exit": os.waitstatus_to_exitcode(status)}), flush=True)
        for state in running.values():
            due = state.kill_at is not None and time.monotonic() >= state.kill_at
            if not state.killed and (due or time.monotonic() >= state.deadline):
                os.kill(state.pid, signal.SIGKILL)
                state.killed = True


if __name__ == "__main__":
    main(json.loads(sys.argv[1]), int(sys.argv[2]))
