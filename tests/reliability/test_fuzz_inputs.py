"""Fuzzing of what a model can send: TaskBriefs, tool arguments, and the text tool-call dialects.

- `normalize_task_brief` either returns a brief that re-validates (with every inherited hard
  constraint, within the limits) or raises `ToolArgumentError`, for any JSON value;
- `ToolRegistry.execute` never raises and always returns a `ToolResult`, for any tool name and
  any argument value, across every model-callable built-in tool that does not run code or reach
  the network, the recursive protocol tools in all three roles, `agent` at its quota, and
  typed custom tools;
- a dialect turns any model text into calls the registry can execute without raising, and
  renders any history without raising.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from reliability_helpers import ROOT, PlanModel, clean_agent_env, recursive_config, tool_context  # noqa: F401

from cyber_agent.core.agent_mode import MAX_CONTEXT_REFS
from cyber_agent.core.context_policy import normalize_task_brief, task_briefs_match
from cyber_agent.core.runner import AgentRunner, default_registry
from cyber_agent.core.task_protocol import MAX_ITEMS, RootTaskAnchor, TaskBrief
from cyber_agent.errors import ToolArgumentError
from cyber_agent.tools.context import ToolContext
from cyber_agent.tools.registry import ToolRegistry, ToolResult
from cyber_agent.trace import InMemoryTraceStore

FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
TEXTS = st.text(max_size=40) | st.sampled_from(["", " ", "\x00", "../../etc/passwd", "a" * 5000, "\u202e"])
BRIEF_KEYS = ["objective", "reason", "completion_criteria", "expected_outputs", "constraints", "context_refs"]


# ---- TaskBrief -----------------------------------------------------------------------------------
def _brief_like() -> st.SearchStrategy[Any]:
    item_lists = st.lists(TEXTS, max_size=25) | JSON
    shaped = st.fixed_dictionaries({}, optional={
        "objective": TEXTS | JSON, "reason": TEXTS | JSON, "completion_criteria": item_lists,
        "expected_outputs": item_lists, "constraints": item_lists,
        "context_refs": st.lists(st.text(max_size=12) | st.dictionaries(st.sampled_from(
            ["message_id", "report_of", "title", "x"]), st.text(max_size=20), max_size=3), max_size=10) | JSON,
    })
    extra = st.dictionaries(st.text(max_size=12), JSON, max_size=2)
    return JSON | shaped | st.builds(lambda a, b: {**a, **b}, shaped, extra)


@FUZZ
@given(raw=_brief_like(), inherited=st.lists(st.text(min_size=1, max_size=30).filter(str.strip), max_size=12))
def test_a_brief_is_normalized_or_refused_with_a_tool_error(raw, inherited):
    anchor = RootTaskAnchor(objective="root", completion_criteria=["done"], constraints=inherited[:6])
    parent = TaskBrief(objective="parent", completion_criteria=["ok"], constraints=inherited[6:])
    try:
        brief = normalize_task_brief(raw, parent_brief=parent, anchor=anchor)
    except ToolArgumentError as exc:
        assert str(exc)
        return
    assert brief.completion_criteria and brief.objective.strip()
    assert len(brief.constraints) <= MAX_ITEMS and len(brief.context_refs) <= MAX_CONTEXT_REFS
    for constraint in [*anchor.constraints, *parent.constraints]:
        assert constraint in brief.constraints, "an inherited hard constraint was dropped"
    again = TaskBrief.model_validate(brief.model_dump())  # stored briefs are read back (revisions, grandchildren)
    assert task_briefs_match(again, brief)


# ---- ToolRegistry.execute ------------------------------------------------------------------------
class Window(BaseModel):
    """A nested argument."""

    start: int = Field(ge=0)
    end: int | None = None
    label: Literal["a", "b"] = "a"


def typed(ctx: ToolContext, count: int, ratio: float = 0.5, flag: bool = False,
          mode: Literal["fast", "slow"] = "fast", tags: list[str] | None = None,
          windows: list[Window] | None = None, table: dict[str, int] | None = None,
          choice: int | str | None = None) -> str:
    """A tool with every kind of parameter.

    Args:
        count: How many.
        ratio: A float.
        flag: A bool.
        mode: A literal.
        tags: Strings.
        windows: Nested models.
        table: A mapping.
        choice: A union.
    """
    return f"{ctx.trace_id} {count} {ratio} {flag} {mode} {tags} {windows} {table} {choice}"


async def explodes(value: str = "") -> str:
    """A tool that fails with an ordinary exception.

    Args:
        value: Anything.
    """
    raise ValueError(f"bad value {value!r}")


UNSAFE = {"bash_command", "evaluate", "web_search", "fetch_page"}
"""Tools that run code or reach the network with whatever arguments they get: fuzzed elsewhere, not here."""


class World:
    """A finished recursive tree in memory: contexts of a root at its child quota, a child and a validator."""

    def __init__(self, workspace: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = InMemoryTraceStore()
        registry = default_registry()
        registry.register(typed)
        registry.register(explodes)
        self.registry = ToolRegistry([spec for spec in registry if spec.name not in UNSAFE])
        children = [f"child {i}" for i in range(1, 7)]
        self.runner = AgentRunner(trace_store=self.store, llm_call=PlanModel(lambda o: children if o == ROOT else []).llm,
                                  tool_registry=registry, workspace=workspace)
        result = self.loop.run_until_complete(self.runner.run_result([{"role": "user", "content": ROOT}],
                                                                     recursive_config()))
        assert result.status == "completed", result.trace.error_message
        traces = self.loop.run_until_complete(self.store.list_traces(limit=None))
        root = next(t for t in traces if t.parent_trace_id is None)
        child = next(t for t in traces if t.lineage.created_by_tool == "agent")
        validator = next(t for t in traces if t.lineage.created_by_tool == "validator")
        (workspace / "notes.txt").write_text("hello\n")
        self.contexts = [tool_context(self.runner, t, root, workspace) for t in (root, child, validator)]
        self.trace_count = len(traces)
        self.names = sorted(self.registry.names())

    def execute(self, name: str, arguments: Any, role: int) -> ToolResult:
        ctx = self.contexts[role]
        allowed = frozenset(self.registry.names())
        return self.loop.run_until_complete(self.registry.execute(name, arguments, allowed=allowed, context=ctx))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    import os

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AGENT_")}
    try:
        world = World(tmp_path_factory.mktemp("workspace"))
    finally:
        os.environ.update(saved)
    yield world
    world.loop.close()


@st.composite
def _call(draw: st.DrawFn, names: list[str], registry: ToolRegistry) -> tuple[str, Any]:
    name = draw(st.sampled_from(names) | st.text(max_size=12))
    spec = registry.get(name)
    params = list(spec.parameters.get("properties", {})) if spec else []
    by_name = st.fixed_dictionaries({}, optional={p: JSON | TEXTS for p in params}) if params else st.just({})
    arguments = draw(by_name | st.dictionaries(st.text(max_size=10), JSON, max_size=4) | JSON
                     | st.builds(lambda a, b: {**a, **b}, by_name, st.dictionaries(st.sampled_from(
                         ["ctx", "context", "__class__", "self", "p0"]), JSON, max_size=2)))
    return name, arguments


def test_the_registry_under_fuzz_holds_the_tools_it_should(world):
    assert {"goal", "read_file", "list_files", "agent", "submit_report", "review_task", "read_context_ref",
            "read_trajectory", "read_artifact", "submit_validation", "typed", "explodes"} <= set(world.names)
    assert not UNSAFE & set(world.names)


@FUZZ
@given(data=st.data(), role=st.integers(0, 2))
def test_execute_never_raises_and_always_returns_a_tool_result(world, data, role):
    name, arguments = data.draw(_call(world.names, world.registry))
    result = world.execute(name, arguments, role)
    assert isinstance(result, ToolResult) and isinstance(result.content, str)
    if name not in world.registry:
        assert result.is_error


def test_fuzzed_agent_calls_created_nothing(world):
    """The root is at its quota of six: no fuzzed `agent` call may have created a trace."""
    world.execute("agent", {"task_brief": {"objective": "one more", "completion_criteria": ["x"]}}, 0)
    traces = world.loop.run_until_complete(world.store.list_traces(limit=None))
    assert len(traces) == world.trace_count


# ---- dialects ----------------------------------------------------------------------------------------
dialects = pytest.importorskip("cyber_agent.llm.dialects", reason="cyber_agent/llm/dialects.py is not there yet")
from cyber_agent.llm.types import LLMResponse  # noqa: E402

TAGGED = st.builds(lambda before, body, after, close: f"{before}<tool_call>{body}{'</tool_call>' if close else ''}{after}",
                   TEXTS, st.one_of(TEXTS, JSON.map(repr), st.builds(lambda n, a: f'{{"name": {n}, "arguments": {a}}}',
                   st.sampled_from(['"typed"', '"read_file"', '"agent"', "7", '"x"']), JSON.map(repr))), TEXTS, st.booleans())
PFORMAT = st.builds(lambda name, body: f"{name}[{body}]", st.sampled_from(["typed", "read_file", "goal", "x"]), TEXTS)


@FUZZ
@given(text=TAGGED | PFORMAT | TEXTS, which=st.sampled_from(["native", "xml", "pformat"]), role=st.integers(0, 2),
       turn=st.integers(0, 5))
def test_any_model_text_parses_into_calls_the_registry_can_execute(world, text, which, role, turn):
    dialect = dialects.choose_dialect("local", "model", override=which)
    schemas = world.registry.schemas()
    parsed = dialect.parse(LLMResponse(content=text), tools=schemas, turn=turn)
    assert isinstance(parsed, LLMResponse)
    for call in parsed.tool_calls:
        result = world.execute(call.name, call.arguments, role)
        assert isinstance(result, ToolResult)


@FUZZ
@given(history=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]),
                                                "content": TEXTS | st.none()},
                                               optional={"tool_calls": st.lists(st.fixed_dictionaries({
                                                   "id": st.text(max_size=8), "type": st.just("function"),
                                                   "function": st.fixed_dictionaries({"name": TEXTS, "arguments": TEXTS | JSON})}),
                                                   max_size=3), "tool_call_id": st.text(max_size=8),
                                                   "name": TEXTS}), max_size=8),
       which=st.sampled_from(["native", "xml", "pformat"]))
def test_any_history_renders_for_any_dialect(world, history, which):
    dialect = dialects.choose_dialect("local", "model", override=which)
    schemas = world.registry.schemas()
    first, _ = dialect.prepare(history, schemas)
    second, _ = dialect.prepare(history, schemas)
    assert first == second, "rendering must be deterministic (the system prompt is reused byte for byte)"
