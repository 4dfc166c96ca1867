"""Shared helpers of the reliability tests: a clean AGENT_* environment, a plan-driven fake model
for whole recursive trees, and a ToolContext built the way the runner builds one.

`PlanModel` answers every agent of a tree from one function, telling roles apart by the tools
the runner offers (its own tool rights decide that):
- `submit_validation` offered → a validator: every criterion passes;
- `review_task` offered with reports pending → accept every pending report in one turn;
- otherwise the agent named by its brief's objective (the root: the anchor's) delegates the
  children `plan(objective)` names, once, in one `agent` call; then it reports (a child) or
  answers (the root). A refused delegation is not retried: the agent reports what it has.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cyber_agent.core.agent_mode import AgentPolicy
from cyber_agent.core.config import RunConfig
from cyber_agent.core.resource_budget import BUDGET_ENV
from cyber_agent.core.runner import AgentRunner
from cyber_agent.core.tool_rights import runtime_tool_names
from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse, ToolCall
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace.models import Trace

ROOT = "reliability root task"
ANCHOR = {"objective": ROOT, "completion_criteria": ["the answer is given"]}
AGENT_ENV = ("AGENT_MODE", "AGENT_RECURSION_ENABLED", *BUDGET_ENV, "AGENT_VALIDATOR_MODEL",
             "AGENT_ROOT_VALIDATOR_MODEL", "AGENT_VALIDATOR_SEARCH_PROVIDER", "SERPER_API_KEY")
_OBJECTIVE = re.compile(r"^Objective: (.*)$", re.M)
_CHILD = re.compile(r"^Child (\S+) \[", re.M)


@pytest.fixture(autouse=True)
def clean_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start from an environment without AGENT_* settings (import it into a test module)."""
    for name in AGENT_ENV:
        monkeypatch.delenv(name, raising=False)


def brief(objective: str) -> dict[str, Any]:
    """A TaskBrief as a model would send it."""
    return {"objective": objective, "completion_criteria": [f"{objective} is done"]}


def recursive_config(**overrides: Any) -> RunConfig:
    """RunConfig of a new recursive root with the test anchor."""
    return RunConfig(**{"agent_mode": "recursive", "root_task_anchor": ANCHOR, "max_iterations": 12, **overrides})


def _call(name: str, index: int, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call_{name}_{index}", name=name, arguments=arguments)


def objective_of(messages: list[dict[str, Any]]) -> str:
    """The brief's objective of a child, the anchor's of the root."""
    for message in messages:
        if message.get("role") == "user" and (match := _OBJECTIVE.search(str(message.get("content") or ""))):
            return match.group(1).strip()
    return ROOT


def pending_children(messages: list[dict[str, Any]]) -> list[str]:
    """Children reported in tool results and not reviewed since."""
    pending: dict[str, None] = {}
    for message in messages:
        if message.get("role") == "tool":
            pending.update(dict.fromkeys(_CHILD.findall(str(message.get("content") or ""))))
        for call in message.get("tool_calls") or []:
            if call["function"]["name"] == "review_task":
                pending.pop(json.loads(call["function"]["arguments"]).get("child_trace_id"), None)
    return list(pending)


class PlanModel:
    """One fake model for a whole recursive tree, driven by `plan(objective) -> child objectives`."""

    def __init__(self, plan: Callable[[str], list[str]] | None = None) -> None:
        self.plan = plan or (lambda _objective: [])
        self.calls: Counter[str] = Counter()
        """Model calls per objective (validators under "validator")."""
        self.llm = FunctionModel(self._answer)

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> LLMResponse:
        names = {(t.get("function") or t)["name"] for t in tools or []}
        if "submit_validation" in names:
            self.calls["validator"] += 1
            return LLMResponse(tool_calls=[_call("submit_validation", 0, summary="met", verdicts=[
                {"criterion": 1, "verdict": "pass", "evidence": "in the trajectory"}])])
        me = objective_of(messages)
        self.calls[me] += 1
        if "review_task" in names and (pending := pending_children(messages)):
            return LLMResponse(tool_calls=[_call("review_task", i, child_trace_id=c, decision="accept")
                                           for i, c in enumerate(pending)])
        delegated = any(c["function"]["name"] == "agent" for m in messages for c in m.get("tool_calls") or [])
        children = self.plan(me)
        if children and not delegated and "agent" in names:
            return LLMResponse(tool_calls=[_call("agent", 0, task_brief=[brief(c) for c in children])])
        if "submit_report" in names:
            return LLMResponse(tool_calls=[_call("submit_report", 0, outcome="completed", summary=f"{me} done",
                                                 outputs=[f"{me} done"])])
        return LLMResponse(content=f"final answer of {me}")


def tool_context(runner: AgentRunner, trace: Trace, root: Trace, workspace: Path, *,
                 config: RunConfig | None = None) -> ToolContext:
    """The ToolContext the runner would give a tool called by `trace` (same fields, same rights)."""
    return ToolContext(
        trace_id=trace.trace_id, store=runner.trace_store, goal_id=None, tool_call_id="call_test",
        workspace=workspace, allowed_tools=runtime_tool_names(runner.tool_registry.names(), None, trace),
        runner=runner, run_config=config or RunConfig(max_iterations=12, workspace=str(workspace)),
        agent_mode=AgentPolicy.of(root).mode, agent_depth=trace.lineage.depth,
    )


def task_objective(trace: Trace) -> str | None:
    """The objective of a child trace's brief (from its task text)."""
    match = _OBJECTIVE.search(trace.task or "")
    return match.group(1).strip() if match else None
