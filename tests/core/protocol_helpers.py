"""Helpers of the recursive task-protocol tests: a role-aware fake model brain and store queries.

`ProtocolBrain` answers every trace of a recursive tree from one `FunctionModel`. It tells the
roles apart only by what the runner offers (its tool rights are the thing under test):
`submit_validation` → a validator, `review_task` → a parent with reports pending, `submit_report`
→ a child, none of them → the root. The depth of an agent is read from the lineage in its task
message, so one brain drives trees of any depth; per-depth hooks override any step.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from cyber_agent.core.config import RunConfig
from cyber_agent.core.runner import AgentRunner
from cyber_agent.llm.fakes import FunctionModel
from cyber_agent.llm.types import LLMResponse, ToolCall, Usage
from cyber_agent.trace import InMemoryTraceStore
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore

ANCHOR = {
    "objective": "Compute the launch checksum",
    "completion_criteria": ["the checksum is stated", "the checksum is derived from the workspace file"],
    "constraints": ["never modify workspace files"],
}
ROOT_TASK = "ROOT-PRIVATE: compute the launch checksum (planning notes stay with the root)"
AGENT_ENV = (
    "AGENT_MODE", "AGENT_RECURSION_ENABLED", "AGENT_VALIDATOR_MODEL", "AGENT_ROOT_VALIDATOR_MODEL",
    "AGENT_VALIDATOR_SEARCH_PROVIDER", "SERPER_API_KEY", "AGENT_RESOURCE_BUDGET_ENABLED", "AGENT_MAX_TOTAL_AGENTS",
    "AGENT_MAX_LLM_CALLS", "AGENT_MAX_TOTAL_TOKENS", "AGENT_MAX_TOTAL_COST_USD", "AGENT_MAX_DURATION_SECONDS",
    "AGENT_MAX_VALIDATION_TOOL_CALLS", "AGENT_MAX_VALIDATION_MATERIAL_CHARS", "AGENT_RESERVED_FINAL_CALLS",
)

Messages = list[dict[str, Any]]
Hook = Callable[["Turn"], "LLMResponse | None | Awaitable[LLMResponse | None]"]


@pytest.fixture(autouse=True)
def clean_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's AGENT_* settings out of every protocol test (import it into the module)."""
    for name in AGENT_ENV:
        monkeypatch.delenv(name, raising=False)


_ids: Iterator[int] = itertools.count(1)


def call(name: str, **arguments: Any) -> LLMResponse:
    """A reply with one tool call."""
    return LLMResponse(tool_calls=[ToolCall(id=f"pc{next(_ids)}", name=name, arguments=arguments)])


def text(content: str) -> LLMResponse:
    """A reply with a final text."""
    return LLMResponse(content=content)


def brief(objective: str, *criteria: str, **extra: Any) -> dict[str, Any]:
    """A TaskBrief as a model would send it."""
    return {"objective": objective, "completion_criteria": list(criteria) or [f"{objective}: done"], **extra}


def recursive_config(anchor: dict[str, Any] | None = None, **overrides: Any) -> RunConfig:
    """A RunConfig for a new recursive root."""
    return RunConfig(agent_mode="recursive", root_task_anchor=anchor or ANCHOR, **overrides)


def tool_names(tools: list[dict[str, Any]] | None) -> set[str]:
    """Names of the tools a request offered."""
    return {(t.get("function") or t)["name"] for t in tools or []}


def first_user(messages: Messages) -> str:
    """The task message of a run (its first user message)."""
    return next(str(m["content"]) for m in messages if m["role"] == "user")


def depth_of(messages: Messages) -> int:
    """The agent_depth in the lineage of a child's task message (0 for the root)."""
    match = re.search(r"agent_depth=(\d+)", first_user(messages))
    return int(match.group(1)) if match else 0


def tool_results(messages: Messages) -> list[str]:
    """Contents of the tool messages, oldest first."""
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def calls_of(messages: Messages, name: str) -> list[dict[str, Any]]:
    """Raw argument strings of every call of `name` in the history."""
    return [c["function"] for m in messages for c in m.get("tool_calls") or [] if c["function"]["name"] == name]


def numbered(block_of: str, heading: str) -> list[str]:
    """The `1. ...` lines following `heading` in a text."""
    tail = block_of.split(heading, 1)[-1]
    items: list[str] = []
    for line in tail.splitlines()[1:]:
        match = re.match(r"^\d+\. (.*)$", line)
        if not match:
            break
        items.append(match.group(1))
    return items


async def own_trace(store: TraceStore, messages: Messages) -> Trace:
    """The non-validator trace these messages belong to (its task is the first user message)."""
    task = first_user(messages)
    found = [t for t in await store.list_traces(limit=None) if t.task == task and t.agent_type != "validator"]
    assert len(found) == 1, f"{len(found)} traces hold this task"
    return found[0]


@dataclass
class Turn:
    """What a hook sees of one model call."""

    brain: ProtocolBrain
    messages: Messages
    names: set[str]
    depth: int
    role: str
    """root | child | parent (reviews pending) | validator."""

    @property
    def results(self) -> list[str]:
        """Tool results so far."""
        return tool_results(self.messages)

    @property
    def task(self) -> str:
        """The run's task message."""
        return first_user(self.messages)

    async def trace(self) -> Trace:
        """The trace of this (non-validator) run."""
        return await own_trace(self.brain.store, self.messages)


def _all_pass(turn: Turn) -> list[dict[str, Any]]:
    criteria = numbered(turn.task, "Completion criteria:")
    return [{"criterion": i, "verdict": "pass", "evidence": "seen in the trajectory"} for i in range(1, len(criteria) + 1)]


@dataclass
class ProtocolBrain:
    """The fake model of a whole recursive tree; each default step can be overridden by a hook.

    Defaults: an agent above `levels` delegates one brief (`brief_for(depth + 1)`), a parent
    accepts each pending child, a child reports, the root answers `answer`, and a validator reads
    the trajectory and then passes every criterion.
    """

    store: TraceStore
    levels: int = 1
    answer: str = "The checksum is 7781."
    hooks: dict[str, Hook] = field(default_factory=dict)
    """Keyed by role ('root', 'child', 'parent', 'validator') or `d{depth}` (tried first)."""
    verdicts: Callable[[Turn], list[dict[str, Any]]] = _all_pass
    first_requests: dict[int, list[tuple[Messages, set[str]]]] = field(default_factory=lambda: defaultdict(list))
    """The first request of every agent run (validators excluded), by depth."""
    validator_models: list[str] = field(default_factory=list)
    """The model name every validator call was made with."""
    usage: Usage | None = None
    """Usage every reply reports (None: zero)."""
    cost: float | None = None
    """Cost every reply reports (None: priced from usage)."""

    def __post_init__(self) -> None:
        self.llm = FunctionModel(self._answer, usage=self.usage, cost=self.cost)

    def brief_for(self, depth: int) -> dict[str, Any]:
        """The brief an agent at `depth - 1` gives its child."""
        return brief(f"level {depth} work", f"level {depth} result is reported")

    def role(self, names: set[str]) -> str:
        """The role the offered tools reveal."""
        if "submit_validation" in names:
            return "validator"
        if "review_task" in names:
            return "parent"
        return "child" if "submit_report" in names else "root"

    async def _answer(self, messages: Messages, tools: list[dict[str, Any]] | None, model: str) -> LLMResponse:
        names = tool_names(tools)
        role = self.role(names)
        depth = depth_of(messages)
        if role == "validator":
            self.validator_models.append(model)
        elif not any(m["role"] == "assistant" for m in messages):
            self.first_requests[depth].append((messages, names))
        turn = Turn(brain=self, messages=messages, names=names, depth=depth, role=role)
        for key in [role] if role == "validator" else [f"d{depth}", role]:
            hook = self.hooks.get(key)
            if hook is not None:
                reply = hook(turn)
                reply = await reply if inspect.isawaitable(reply) else reply
                if reply is not None:
                    return reply
        return await self.default(turn)

    async def default(self, turn: Turn) -> LLMResponse:
        """The default step of a turn."""
        if turn.role == "validator":
            if not turn.results:
                return call("read_trajectory")
            return call("submit_validation", verdicts=self.verdicts(turn), summary="judged on the trajectory")
        if turn.role == "parent":
            pending = (await turn.trace()).protocol.pending_reviews
            return call("review_task", child_trace_id=pending[0], decision="accept", feedback="looks right")
        if turn.depth < self.levels and "agent" in turn.names and not calls_of(turn.messages, "agent"):
            return call("agent", task_brief=self.brief_for(turn.depth + 1))
        if turn.role == "child":
            return call("submit_report", outcome="completed", summary=f"level {turn.depth} done",
                        outputs=[f"level {turn.depth} result"], evidence=["see my trajectory"])
        return text(self.answer)


def make_runner(brain_or_llm: Any = None, *, store: TraceStore | None = None, **kwargs: Any) -> AgentRunner:
    """An AgentRunner on an in-memory store with the default registry."""
    llm = brain_or_llm.llm if isinstance(brain_or_llm, ProtocolBrain) else brain_or_llm
    store = store or (brain_or_llm.store if isinstance(brain_or_llm, ProtocolBrain) else InMemoryTraceStore())
    return AgentRunner(trace_store=store, llm_call=llm, **kwargs)


def new_brain(**kwargs: Any) -> ProtocolBrain:
    """A ProtocolBrain on a fresh in-memory store."""
    return ProtocolBrain(store=InMemoryTraceStore(), **kwargs)


async def children_of(store: TraceStore, trace_id: str) -> list[Trace]:
    """Business children (created by `agent`) of a trace, oldest first."""
    found = await store.list_traces(parent_trace_id=trace_id, created_by_tool="agent", limit=None)
    return sorted(found, key=lambda t: t.trace_id)


async def validators_of(store: TraceStore, trace_id: str) -> list[Trace]:
    """Validator traces judging a trace, oldest first."""
    found = await store.list_traces(parent_trace_id=trace_id, created_by_tool="validator", limit=None)
    return sorted(found, key=lambda t: t.trace_id)


async def chain(store: TraceStore, root_id: str) -> list[Trace]:
    """The root and its first business descendants, one per depth."""
    out = [await store.get_trace(root_id)]
    while kids := await children_of(store, out[-1].trace_id):
        out.append(kids[0])
    return out


def protocol(trace: Trace) -> dict[str, Any]:
    """The typed protocol state of a trace (`Trace.protocol`) in its JSON form."""
    return trace.protocol.model_dump(mode="json")


def judged(trace: Trace) -> list[dict[str, Any]]:
    """The trace's validations by validator traces (and runner verdicts), without the evidence checks before them."""
    return [v for v in protocol(trace)["validations"] if v["scope"] != "evidence"]


async def run_root(runner: AgentRunner, config: RunConfig | None = None, task: str = ROOT_TASK):
    """Run a new recursive root to the end."""
    return await runner.run_result([{"role": "user", "content": task}], config or recursive_config())


ROOT_ID = "00000000-0000-4000-8000-0000000000aa"
"""A fixed root id, so a script can name the root's messages (`{ROOT_ID}-0005`)."""


def rooted(**overrides: Any) -> RunConfig:
    """recursive_config with the fixed ROOT_ID."""
    anchor = overrides.pop("anchor", None)
    return recursive_config(anchor, new_trace_id=ROOT_ID, **overrides)


def pending_block(messages: Messages, child_id: str) -> str:
    """The latest outcome text of `child_id` shown to its parent (report + validation)."""
    for content in reversed(tool_results(messages)):
        start = content.find(f"Child {child_id} [")
        if start >= 0:
            end = content.find("\n\nChild ", start + 1)
            return content[start:] if end < 0 else content[start:end]
    raise AssertionError(f"no outcome of {child_id} in the history")


async def goal_statuses(store: TraceStore, trace_id: str, goal_id: str = "1") -> list[str]:
    """Statuses a goal went through: its status when added, then its `goal_updated` events."""
    events = await store.get_events(trace_id)
    statuses = [e.payload["goal"]["status"] for e in events
                if e.type == "goal_added" and e.payload["goal"]["id"] == goal_id]
    return statuses + [e.payload["patch"]["status"] for e in events
                       if e.type == "goal_updated" and e.payload["goal_id"] == goal_id and "status" in e.payload["patch"]]


async def pending_of(turn: Turn) -> list[str]:
    """The pending reviews of the turn's own trace."""
    return protocol(await turn.trace()).get("pending_reviews", [])
