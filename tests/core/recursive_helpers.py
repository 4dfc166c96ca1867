"""Shared helpers of the recursive-mode tests: a role-aware fake model and run shortcuts.

`TreeModel` answers every agent of a task tree from one function, telling the roles apart by
the tools it is offered (the runner's own tool rights decide that):
- `submit_validation` offered → a validator: it plays the VALIDATOR steps, then passes every criterion;
- `review_task` offered → a parent with reports to review: it plays its `objective + REVIEW_TURN`
  steps, then accepts the oldest pending report;
- otherwise an agent identified by the objective of its brief (or the root anchor, or its
  legacy task): it plays its queued steps, then reports (children) or answers (root).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.resource_budget import BUDGET_ENV
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.tools.registry import ToolRegistry
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.budget_limits import ResourceUsage

ROOT = "solve the root task"
"""Objective of the root anchor; also the key TreeModel files the root's calls under."""
ANCHOR = {"objective": ROOT, "completion_criteria": ["the answer is given"]}
TASK = [{"role": "user", "content": ROOT}]
VALIDATOR = "validator"
"""Key TreeModel files every validator call under."""
REVIEW_TURN = " [review]"
"""Plan key suffix: steps an objective plays in turns where it has reports to review."""

AGENT_ENV = (
    "AGENT_MODE", "AGENT_RECURSION_ENABLED", *BUDGET_ENV, "AGENT_VALIDATOR_MODEL", "AGENT_ROOT_VALIDATOR_MODEL",
    "AGENT_VALIDATOR_SEARCH_PROVIDER", "SERPER_API_KEY",
)

Step = LLMResponse | Callable[[list[dict[str, Any]], set[str]], LLMResponse | Awaitable[LLMResponse]]
"""A queued answer: a response, or a function of (messages, offered tool names) returning one."""


@pytest.fixture(autouse=True)
def clean_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test from an environment without AGENT_* settings (import it into a test module)."""
    for name in AGENT_ENV:
        monkeypatch.delenv(name, raising=False)


def make_runner(
    llm: Any, store: TraceStore | None = None, registry: ToolRegistry | None = None
) -> tuple[AgentRunner, TraceStore]:
    """An AgentRunner on `store` (a fresh in-memory one by default) with the default tools."""
    store = store if store is not None else InMemoryTraceStore()
    return AgentRunner(trace_store=store, llm_call=llm, tool_registry=registry), store


def recursive_config(**overrides: Any) -> RunConfig:
    """A RunConfig for a new recursive root with the test anchor."""
    return RunConfig(**{"agent_mode": "recursive", "root_task_anchor": ANCHOR, **overrides})


def brief(objective: str, *criteria: str, **extra: Any) -> dict[str, Any]:
    """A TaskBrief as a model would send it."""
    return {"objective": objective, "completion_criteria": list(criteria) or [f"{objective} is done"], **extra}


def call(name: str, **arguments: Any) -> LLMResponse:
    """A reply with one tool call."""
    return calls((name, arguments))


def calls(*pairs: tuple[str, dict[str, Any]], usage: Usage | None = None, cost: float | None = None) -> LLMResponse:
    """A reply with several tool calls, optionally with usage and cost."""
    fields: dict[str, Any] = {
        "tool_calls": [ToolCall(id=f"call_{uuid.uuid4().hex[:8]}", name=n, arguments=a) for n, a in pairs]
    }
    if usage is not None:
        fields["usage"] = usage
    if cost is not None:
        fields["cost"] = cost
    return LLMResponse(**fields)


def delegate(*briefs: dict[str, Any], continue_from: str | None = None) -> LLMResponse:
    """An `agent` call: one brief as an object, several as a list."""
    args: dict[str, Any] = {"task_brief": briefs[0] if len(briefs) == 1 else list(briefs)}
    if continue_from is not None:
        args["continue_from"] = continue_from
    return call("agent", **args)


def report(summary: str, outcome: str = "completed") -> LLMResponse:
    """A `submit_report` call."""
    return call("submit_report", outcome=outcome, summary=summary, outputs=[summary])


def tool_names(tools: Iterable[dict[str, Any]] | None) -> set[str]:
    """Names of the tool schemas a request offered."""
    return {(t.get("function") or t)["name"] for t in tools or []}


def objective_of(messages: list[dict[str, Any]]) -> str | None:
    """The objective of the agent: its brief's (recursive child), the anchor's (recursive root), else its task."""
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    for text in users:
        match = re.search(r"^Objective: (.*)$", text, re.M)
        if match:
            return match.group(1).strip()
    return users[0].strip().splitlines()[0] if users and users[0].strip() else None


def depth_of(messages: list[dict[str, Any]]) -> int:
    """The agent_depth stated in the lineage of a child's task (0 for the root)."""
    for message in messages:
        match = re.search(r"agent_depth=(\d+)", str(message.get("content") or ""))
        if message.get("role") == "user" and match:
            return int(match.group(1))
    return 0


def pending_children(messages: list[dict[str, Any]]) -> list[str]:
    """Child ids reported in tool results and not reviewed since, oldest first."""
    pending: dict[str, None] = {}
    for message in messages:
        if message.get("role") == "tool":
            for child in re.findall(r"^Child (\S+) \[", str(message.get("content") or ""), re.M):
                pending[child] = None
        for tool_call in message.get("tool_calls") or []:
            if tool_call["function"]["name"] == "review_task":
                args = json.loads(tool_call["function"]["arguments"])
                pending.pop(args.get("child_trace_id"), None)
    return list(pending)


def reported_children(messages: list[dict[str, Any]]) -> list[str]:
    """Every child id reported in tool results, in first-seen order."""
    seen: dict[str, None] = {}
    for message in messages:
        if message.get("role") == "tool":
            for child in re.findall(r"^Child (\S+) \[", str(message.get("content") or ""), re.M):
                seen[child] = None
    return list(seen)


def last_tool_result(messages: list[dict[str, Any]]) -> str:
    """Content of the most recent tool message."""
    return next(str(m["content"]) for m in reversed(messages) if m.get("role") == "tool")


def _criteria_count(messages: list[dict[str, Any]]) -> int:
    text = str(messages[1].get("content") if len(messages) > 1 else "")
    block = text.split("Completion criteria:", 1)[-1]
    return max(1, len(re.findall(r"^\d+\. ", block, re.M)))


class TreeModel:
    """One fake model for a whole recursive tree; records calls per objective and concurrency."""

    def __init__(
        self,
        plan: dict[str, list[Step]] | None = None,
        *,
        delays: dict[str, float] | None = None,
        on_call: Callable[[str, list[dict[str, Any]], set[str]], Any] | None = None,
        hold: Callable[[str], Awaitable[None]] | None = None,
        usage: Usage | None = None,
        cost: float | None = None,
    ) -> None:
        self.plan = {key: list(steps) for key, steps in (plan or {}).items()}
        self.delays = delays or {}
        self.on_call = on_call
        self.hold = hold
        """Awaited inside a child's in-flight window (after its delay), e.g. to wait for a sibling."""
        self.calls: Counter[str] = Counter()
        """Model calls per objective (validators under VALIDATOR)."""
        self.offered: dict[str, list[set[str]]] = defaultdict(list)
        """Tool names offered to each objective, per call."""
        self.in_flight = 0
        self.max_in_flight = 0
        """Most calls of children (neither the root nor a validator) in flight at once."""
        self.finished: list[str] = []
        """Children's objectives in the order their calls left the in-flight window."""
        # Scripted usage without a cost is an explicit $0 (the model "scripted" has no price, and
        # unpriced usage fails a USD limit closed); tests of unpriced usage pass their own replies.
        self.llm = FunctionModel(self._answer, usage=usage, cost=0.0 if cost is None and usage is not None else cost)

    async def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> LLMResponse:
        names = tool_names(tools)
        key = VALIDATOR if "submit_validation" in names else (objective_of(messages) or "?")
        self.calls[key] += 1
        self.offered[key].append(names)
        if self.on_call is not None:
            outcome = self.on_call(key, messages, names)
            if inspect.isawaitable(outcome):
                await outcome
        is_child = key not in (VALIDATOR, ROOT)
        if is_child:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            # Always yield once, so concurrently scheduled children get the chance to overlap.
            await asyncio.sleep(self.delays.get(key, 0))
            if is_child and self.hold is not None:
                await self.hold(key)
        finally:
            if is_child:
                self.in_flight -= 1
        if is_child:
            self.finished.append(key)
        return await self._decide(key, messages, names)

    async def _decide(self, key: str, messages: list[dict[str, Any]], names: set[str]) -> LLMResponse:
        if key == VALIDATOR:
            if self.plan.get(VALIDATOR):
                return await self._play(self.plan[VALIDATOR].pop(0), messages, names)
            verdicts = [{"criterion": i, "verdict": "pass", "evidence": "seen in the trajectory"}
                        for i in range(1, _criteria_count(messages) + 1)]
            return call("submit_validation", verdicts=verdicts, summary="all criteria met")
        if "review_task" in names:
            forced = self.plan.get(key + REVIEW_TURN)
            if forced:
                return await self._play(forced.pop(0), messages, names)
            pending = pending_children(messages)
            if pending:
                return call("review_task", child_trace_id=pending[0], decision="accept")
        queue = self.plan.get(key)
        if queue:
            return await self._play(queue.pop(0), messages, names)
        if "submit_report" in names:
            return report(f"report of {key}")
        return LLMResponse(content=f"final answer of {key}")

    @staticmethod
    async def _play(step: Step, messages: list[dict[str, Any]], names: set[str]) -> LLMResponse:
        if isinstance(step, LLMResponse):
            return step
        result = step(messages, names)
        return await result if inspect.isawaitable(result) else result


async def all_traces(store: TraceStore) -> list[Trace]:
    """Every trace in the store."""
    return await store.list_traces(limit=None)


async def trace_by_objective(store: TraceStore, objective: str) -> Trace:
    """The (child) trace whose brief has this objective, or the root for ROOT."""
    for trace in await all_traces(store):
        if trace.is_validator:
            continue
        if trace.parent_trace_id is None:
            if objective == ROOT:
                return trace
            continue
        first = re.search(r"^Objective: (.*)$", trace.task or "", re.M)  # the brief's, not the anchor's
        if first and first.group(1).strip() == objective:
            return trace
    raise AssertionError(f"no trace with objective {objective!r}")


async def messages_of(store: TraceStore, trace_id: str) -> list[Message]:
    """All messages of a trace, in sequence order."""
    return await store.get_trace_messages(trace_id)


async def usage_of(store: TraceStore, root_id: str) -> dict[str, Any]:
    """The root's persisted resource usage, as the JSON record the store keeps (the store returns it typed)."""
    usage = await store.get_resource_usage(root_id)
    assert isinstance(usage, ResourceUsage), f"no resource usage on {root_id}"
    return usage.model_dump(mode="json")


# ---- stores that misbehave on purpose ------------------------------------------------------------
class FailingStartStore(InMemoryTraceStore):
    """Fails the `sub_trace_started` event of the second child, so that child is never created."""

    def __init__(self) -> None:
        super().__init__()
        self.started = 0

    async def append_event(self, trace_id: str, event_type: Any, payload: dict[str, Any]) -> int:
        if event_type == "sub_trace_started":
            self.started += 1
            if self.started == 2:
                raise OSError("disk full")
        return await super().append_event(trace_id, event_type, payload)


class YieldingStore(InMemoryTraceStore):
    """Yields to the event loop inside every usage read and write, so unlocked updates would interleave."""

    async def get_resource_usage(self, root_trace_id: str) -> ResourceUsage | None:
        await asyncio.sleep(0)
        return await super().get_resource_usage(root_trace_id)

    async def replace_resource_usage(self, root_trace_id: str, usage: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        await super().replace_resource_usage(root_trace_id, usage)


async def wait_until(predicate: Callable[[], Any], timeout: float = 2.0) -> bool:
    """Poll `predicate` (sync or async) until it holds; False after `timeout` (a hang guard, not a measure)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.002)
