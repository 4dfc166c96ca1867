"""Runner factory the test servers load with `--runner-factory server_factories:make_runner`.

The model (`ServerTestModel`) plays scripted behaviour chosen by the task's prefix and hands
every other task to the offline `demo` model, so the demo task runs exactly as in the CLI:

- `deploy: TARGET`       one turn calls `look` and the confirmable `deploy`; then "deployed".
- `deploy_slow: TARGET`  calls the confirmable `deploy_slow`, whose side effect never finishes.
- `gated: NAME STEPS`    turn 0 calls `note`; turn 1 waits until the file `$SERVER_TEST_DIR/NAME`
                         exists; turns up to STEPS call `note`; then a final answer.
- `echo`                 answers "echo N" (N = assistant turns so far + 1), never a tool.
- a reflection prompt    answers two lessons as '- ' lines.
- a recursive child's call waits while the file `$SERVER_TEST_DIR/hold_children` exists.
- `hostile: KIND`        one turn makes the worst tool call of KIND (`list_files_escape`,
                         `list_files_walk`, `evaluate_bigint`, `slow_sync`); then "hostile done".
                         `slow_sync` blocks its thread until `$SERVER_TEST_DIR/release` exists.

Side effects of the confirmable tools are lines in `$SERVER_TEST_DIR/side_effects.log`, so a
test can count how often a tool really ran — across server restarts.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from cyber_agent.core.runner import AgentRunner, default_registry
from cyber_agent.llm.demo import DemoModel
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.reflection import REFLECTION_PROMPT_HEADER

REPO_ROOT = Path(__file__).resolve().parents[2]
LESSONS = ("check which file every number comes from", "name the top region explicitly")


HOSTILE_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_files_escape": ("list_files", {"pattern": "../../../../**/*"}),
    "list_files_walk": ("list_files", {"pattern": "**/*.nothing"}),
    "evaluate_bigint": ("evaluate", {"expression": "[2**999999 // 3**315000 for _ in [1, 2, 3]]"}),
    "slow_sync": ("slow_sync", {"seconds": 20}),
}
"""The worst tool calls of the [hardening] issue, by name."""


def work_dir() -> Path:
    return Path(os.environ["SERVER_TEST_DIR"])


def _side_effect(line: str) -> None:
    with open(work_dir() / "side_effects.log", "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def make_registry() -> ToolRegistry:
    registry = default_registry()

    def note(text: str) -> str:
        """Write a note (harmless)."""
        return f"noted: {text}"

    def look(path: str) -> str:
        """Look at something (harmless)."""
        return f"looked at {path}"

    def deploy(target: str, force: bool = False) -> str:
        """Deploy to a target (needs a human)."""
        _side_effect(f"deploy {target} force={force}")
        return f"deployed {target}"

    async def deploy_slow(target: str) -> str:
        """Deploy slowly (needs a human); never finishes in the tests."""
        _side_effect(f"deploy_slow started {target}")
        while True:
            await asyncio.sleep(0.05)

    def slow_sync(seconds: float) -> str:
        """Block (a sync tool doing slow I/O) until released or `seconds` pass."""
        (work_dir() / "slow_started").touch()
        deadline = time.monotonic() + seconds
        while not (work_dir() / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return "slow done"

    registry.register(note)
    registry.register(look)
    registry.register(slow_sync)
    registry.register(deploy, requires_confirmation=True, editable_params=("target",), side_effects=True)
    registry.register(deploy_slow, requires_confirmation=True, side_effects=True)
    return registry


class ServerTestModel:
    """Scripted behaviour by task prefix; the demo model for everything else."""

    def __init__(self) -> None:
        self.demo = DemoModel()

    async def __call__(self, messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None = None,
                       temperature: float | None = None, *, on_delta: Any = None) -> LLMResponse:
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        task = users[0] if users else ""
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if users and users[-1].startswith(REFLECTION_PROMPT_HEADER):
            return LLMResponse(content="Lessons:\n" + "\n".join(f"- {lesson}" for lesson in LESSONS))
        if task.startswith("deploy:") or task.startswith("deploy_slow:"):
            kind, _, target = task.partition(":")
            if messages[-1].get("role") == "tool":
                return LLMResponse(content=f"{kind} finished: {messages[-1].get('content')}")
            calls = [ToolCall(id=f"t{turn}_look", name="look", arguments={"path": target.strip()})] if kind == "deploy" else []
            calls.append(ToolCall(id=f"t{turn}_{kind}", name=kind, arguments={"target": target.strip()}))
            return LLMResponse(content="", tool_calls=calls)
        if task.startswith("gated:"):
            name, steps = task.removeprefix("gated:").split()
            if turn == 1:
                while not (work_dir() / name).exists():
                    await asyncio.sleep(0.02)
            if turn < int(steps):
                return LLMResponse(content="", tool_calls=[ToolCall(id=f"n{turn}", name="note", arguments={"text": f"step {turn}"})])
            return LLMResponse(content=f"gated {name} done after {turn} turns")
        if task.startswith("hostile:"):
            if messages[-1].get("role") == "tool":
                return LLMResponse(content="hostile done")
            name, arguments = HOSTILE_CALLS[task.removeprefix("hostile:").strip()]
            return LLMResponse(content="", tool_calls=[ToolCall(id=f"h{turn}", name=name, arguments=arguments)])
        if "# Task brief" in task:
            while (work_dir() / "hold_children").exists():
                await asyncio.sleep(0.02)
        if task.startswith("echo"):
            return LLMResponse(content=f"echo {turn + 1}")
        return await self.demo(messages, model, tools, temperature, on_delta=on_delta)


def make_runner(store: TraceStore) -> AgentRunner:
    """The factory the test servers load."""
    return AgentRunner(trace_store=store, llm_call=ServerTestModel(), tool_registry=make_registry(), workspace=REPO_ROOT)
