"""ToolRegistry: schema derivation, context injection, the allowed-snapshot gate, execution."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Literal

import pytest
from pydantic import AfterValidator, BaseModel

from cyber_agent.errors import ConfigurationError, GoalError, ToolArgumentError, ToolError, UnknownToolError
from cyber_agent.tools import ToolContext, ToolRegistry, ToolResult


class Point(BaseModel):
    """A point on the plane."""

    x: int
    y: int = 0


def describe(ctx: ToolContext, name: str, count: int = 3, mode: Literal["fast", "slow"] = "fast",
             where: Point | None = None, tags: list[str] | None = None) -> str:
    """Describe something.

    This second paragraph is not part of the tool description.

    Args:
        name (str): What to describe;
            continued on a second line.
        count: How many times.
        mode: Speed.

    Returns:
        Text.
    """
    return f"{name} x{count} {mode} {where} {tags} {ctx.trace_id}"


def params(registry: ToolRegistry, name: str) -> dict:
    return registry.schemas([name])[0]["function"]["parameters"]


# ---- schema ------------------------------------------------------------------------------
def test_a_module_function_is_specified_once_and_closures_every_time() -> None:
    """Fresh registries per run reuse the frozen spec of a plain function; options still apply."""
    first, second = ToolRegistry(), ToolRegistry()
    assert first.register(describe) is second.register(describe)
    confirmed = ToolRegistry().register(describe, requires_confirmation=True, editable_params=["name"])
    assert confirmed.requires_confirmation and confirmed.editable_params == ("name",)
    assert not first.get("describe").requires_confirmation

    def make(prefix: str):
        def shout(text: str) -> str:
            """Shout."""
            return prefix + text
        return shout

    one, two = ToolRegistry().register(make("a")), ToolRegistry().register(make("b"))
    assert one is not two and one.func("x") == "ax" and two.func("x") == "bx"


def test_schema_is_derived_from_hints_defaults_and_docstring() -> None:
    registry = ToolRegistry()
    registry.register(describe)
    entry = registry.schemas()[0]
    assert entry["type"] == "function"
    fn = entry["function"]
    assert fn["name"] == "describe"
    assert fn["description"] == "Describe something."
    schema = fn["parameters"]
    props = schema["properties"]
    assert list(props) == ["name", "count", "mode", "where", "tags"]
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False
    assert props["name"] == {"type": "string", "description": "What to describe; continued on a second line."}
    assert props["count"]["type"] == "integer" and props["count"]["default"] == 3
    assert props["count"]["description"] == "How many times."
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert {"$ref": "#/$defs/Point"} in props["where"]["anyOf"]
    assert {"type": "null"} in props["where"]["anyOf"]
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert {"type": "array", "items": {"type": "string"}} in props["tags"]["anyOf"]
    assert "title" not in schema and "title" not in props["name"]


def test_context_parameter_never_appears_in_the_schema() -> None:
    registry = ToolRegistry()
    spec = registry.register(describe)
    assert "ctx" not in params(registry, "describe")["properties"]
    assert spec.context_params == ("ctx",)


def test_parameter_names_that_clash_with_pydantic_attributes_work() -> None:
    registry = ToolRegistry()

    @registry.tool
    def store(json: str, schema: int = 1, model_config: bool = False) -> str:
        """Store a document."""
        return f"{json}:{schema}:{model_config}"

    assert list(params(registry, "store")["properties"]) == ["json", "schema", "model_config"]


async def test_clashing_parameter_names_are_passed_through(ctx: ToolContext) -> None:
    registry = ToolRegistry()

    @registry.tool
    def store(json: str, schema: int = 1) -> str:
        """Store a document."""
        return f"{json}:{schema}"

    result = await registry.execute("store", {"json": "doc", "schema": 2}, allowed={"store"}, context=ctx)
    assert result.content == "doc:2"


# ---- registration ------------------------------------------------------------------------
def test_decorator_bare_and_with_options_returns_the_function() -> None:
    registry = ToolRegistry()

    @registry.tool
    def one() -> str:
        """Return one."""
        return "1"

    @registry.tool(name="two_renamed", side_effects=True, category="demo")
    def two() -> str:
        """Return two."""
        return "2"

    assert one() == "1" and two() == "2"
    assert registry.names() == ["one", "two_renamed"]
    spec = registry.get("two_renamed")
    assert spec is not None and spec.side_effects and spec.category == "demo" and not spec.is_async


def test_editable_params_must_be_model_visible_parameters() -> None:
    registry = ToolRegistry()
    with pytest.raises(ConfigurationError, match="'nope'"):
        registry.register(describe, requires_confirmation=True, editable_params=["nope"])
    with pytest.raises(ConfigurationError, match="'ctx'"):
        registry.register(describe, requires_confirmation=True, editable_params=["ctx"])
    with pytest.raises(ConfigurationError, match="requires_confirmation"):
        registry.register(describe, editable_params=["name"])
    spec = registry.register(describe, requires_confirmation=True, editable_params=["name", "count"])
    assert spec.editable_params == ("name", "count") and spec.requires_confirmation


def test_apply_edits_accepts_only_editable_params() -> None:
    spec = ToolRegistry().register(describe, requires_confirmation=True, editable_params=["count"])
    assert spec.apply_edits({"name": "a", "count": 1}, {"count": 5}) == {"name": "a", "count": 5}
    with pytest.raises(ToolArgumentError, match="cannot edit argument\\(s\\) \\['name'\\].*editable: count"):
        spec.apply_edits({"name": "a"}, {"name": "b"})
    with pytest.raises(ToolArgumentError, match="count"):
        spec.apply_edits({"name": "a"}, {"count": "many"})


def test_invalid_definitions_are_refused() -> None:
    registry = ToolRegistry()

    def no_doc(x: int) -> int:
        return x

    def var_args(*items: int) -> int:
        """Sum items."""
        return sum(items)

    def gen() -> object:
        """Yield."""
        yield 1

    with pytest.raises(ConfigurationError, match="no description"):
        registry.register(no_doc)
    registry.register(no_doc, description="Echo x.")
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(no_doc, description="Echo x.")
    with pytest.raises(ConfigurationError, match="named parameters only"):
        registry.register(var_args)
    with pytest.raises(ConfigurationError, match="generator"):
        registry.register(gen)
    with pytest.raises(ConfigurationError, match="names must match"):
        registry.register(no_doc, name="has space", description="x")


def test_lookup_schemas_subset_and_copy() -> None:
    registry = ToolRegistry()
    for name in ("a", "b", "c"):
        registry.register(describe, name=name)
    assert [s["function"]["name"] for s in registry.schemas(["c", "a"])] == ["a", "c"]
    assert "b" in registry and "z" not in registry and len(registry) == 3
    assert registry.get("z") is None
    with pytest.raises(UnknownToolError, match="'z'"):
        registry.schemas(["z"])
    sub = registry.subset(["b", "c"])
    assert sub.names() == ["b", "c"]
    clone = registry.copy()
    clone.register(describe, name="d")
    assert "d" in clone and "d" not in registry
    with pytest.raises(UnknownToolError, match="available tools: a, b"):
        registry.resolve("c", allowed={"a", "b"})


# ---- execution ---------------------------------------------------------------------------
async def test_context_is_injected_and_cannot_be_forged(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    seen: list[ToolContext] = []

    @registry.tool
    def whoami(ctx: ToolContext) -> str:
        """Say which trace calls."""
        seen.append(ctx)
        return ctx.trace_id

    result = await registry.execute("whoami", {}, allowed={"whoami"}, context=ctx)
    assert result.content == ctx.trace_id and not result.is_error
    forged = await registry.execute("whoami", {"ctx": {"trace_id": "evil"}}, allowed={"whoami"}, context=ctx)
    assert forged.is_error and "supplied by the runner" in forged.content
    assert len(seen) == 1


async def test_optional_context_parameter_is_injected_too(ctx: ToolContext) -> None:
    registry = ToolRegistry()

    @registry.tool
    def where(context: ToolContext | None = None) -> str:
        """Say where the call runs."""
        return context.tool_call_id if context else "no context"

    assert params(registry, "where")["properties"] == {}
    assert (await registry.execute("where", {}, allowed={"where"}, context=ctx)).content == "call_1"


async def test_tool_sees_the_dispatch_snapshot_not_the_context_field(ctx: ToolContext) -> None:
    registry = ToolRegistry()

    @registry.tool
    def tools(ctx: ToolContext) -> list[str]:
        """List the caller's tools."""
        return sorted(ctx.allowed_tools)

    forged_context = dataclasses.replace(ctx, allowed_tools=frozenset({"tools", "bash_command", "agent"}))
    result = await registry.execute("tools", None, allowed=frozenset({"tools"}), context=forged_context)
    assert result.data == ["tools"]


async def test_unexposed_tool_is_refused_before_arguments_are_parsed(ctx: ToolContext) -> None:
    """A6: a forged call never reaches argument validation, injection or the function."""
    registry = ToolRegistry()
    effects: list[str] = []

    def record(value: str) -> str:
        effects.append(f"validated {value}")
        return value

    def launch(ctx: ToolContext, target: str) -> str:
        """Launch something."""
        effects.append(f"launched {target}")
        return "launched"

    # The validator is a local; string annotations could not see it, so set the real object.
    launch.__annotations__["target"] = Annotated[str, AfterValidator(record)]
    registry.register(launch, side_effects=True)

    refused = await registry.execute("launch", {"target": "moon"}, allowed={"other"}, context=ctx)
    assert refused.is_error and "'launch' is not available" in refused.content
    unknown = await registry.execute("missing", {"target": "moon"}, allowed={"missing"}, context=ctx)
    assert unknown.is_error and "'missing' is not available" in unknown.content
    assert effects == []
    allowed = await registry.execute("launch", {"target": "moon"}, allowed={"launch"}, context=ctx)
    assert allowed.content == "launched"
    assert effects == ["validated moon", "launched moon"]


async def test_validation_errors_name_the_field_the_problem_and_the_expected_type(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    calls: list[object] = []

    @registry.tool
    def plot(ctx: ToolContext, name: str, count: int = 3, mode: Literal["fast", "slow"] = "fast") -> str:
        """Plot."""
        calls.append(name)
        return "ok"

    result = await registry.execute("plot", {"count": "many", "mode": "warp", "colour": 1},
                                    allowed={"plot"}, context=ctx)
    assert result.is_error and calls == []
    text = result.content
    assert "invalid arguments for tool 'plot'" in text
    assert "- name: Field required; expected string" in text
    assert "- count: Input should be a valid integer" in text and "(got 'many')" in text and "expected integer" in text
    assert "- mode:" in text and 'one of "fast", "slow"' in text
    assert "- colour: unexpected argument; accepted: name, count, mode" in text
    not_an_object = await registry.execute("plot", ["x"], allowed={"plot"}, context=ctx)  # type: ignore[arg-type]
    assert not_an_object.is_error and "must be a JSON object" in not_an_object.content


async def test_sync_async_and_threaded_tools_run(ctx: ToolContext) -> None:
    registry = ToolRegistry()

    @registry.tool
    def sync_add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @registry.tool
    async def async_add(a: int, b: int) -> int:
        """Add later."""
        await asyncio.sleep(0)
        return a + b

    @registry.tool(run_in_thread=True)
    def blocking_add(a: int, b: int) -> int:
        """Add in a thread."""
        return a + b

    allowed = set(registry.names())
    for name in allowed:
        result = await registry.execute(name, {"a": 2, "b": "3"}, allowed=allowed, context=ctx)
        assert (result.content, result.data, result.is_error) == ("5", 5, False)
        assert "duration_ms" in result.metadata
    assert registry.get("async_add").is_async  # type: ignore[union-attr]


async def test_return_values_are_rendered_as_text(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    values = {"text": "plain", "none": None, "mapping": {"k": [1, "é"]}, "model": Point(x=1)}

    @registry.tool
    def give(kind: str) -> object:
        """Give a value."""
        return values[kind]

    @registry.tool
    def annotated() -> ToolResult:
        """Give a result with metadata."""
        return ToolResult(content="cut", metadata={"truncated": True})

    allowed = {"give", "annotated"}
    rendered = {k: (await registry.execute("give", {"kind": k}, allowed=allowed, context=ctx)).content for k in values}
    assert rendered == {"text": "plain", "none": "(no output)", "mapping": '{"k":[1,"é"]}', "model": '{"x":1,"y":0}'}
    passthrough = await registry.execute("annotated", {}, allowed=allowed, context=ctx)
    assert passthrough.content == "cut" and passthrough.metadata["truncated"] is True
    assert "duration_ms" in passthrough.metadata


async def test_exceptions_become_error_results(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    errors = {"tool": ToolError("file 'x' is missing"), "goal": GoalError("no goal 9"), "other": ValueError("boom")}

    @registry.tool
    def fail(kind: str) -> str:
        """Fail."""
        raise errors[kind]

    out = {k: await registry.execute("fail", {"kind": k}, allowed={"fail"}, context=ctx) for k in errors}
    assert all(r.is_error for r in out.values())
    assert out["tool"].content == "file 'x' is missing"
    assert out["goal"].content == "no goal 9"
    assert out["other"].content == "tool fail failed: ValueError: boom"


async def test_cancellation_is_never_swallowed(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    started = asyncio.Event()

    @registry.tool
    async def wait_forever() -> str:
        """Wait."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    @registry.tool
    async def raise_cancel() -> str:
        """Raise CancelledError."""
        raise asyncio.CancelledError

    allowed = {"wait_forever", "raise_cancel"}
    with pytest.raises(asyncio.CancelledError):
        await registry.execute("raise_cancel", {}, allowed=allowed, context=ctx)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(registry.execute("wait_forever", {}, allowed=allowed, context=ctx))
        await started.wait()
        task.cancel()
    # A swallowed cancellation would have finished the task with an error result instead.
    assert task.cancelled()


async def test_a_slow_sync_tool_runs_off_the_event_loop(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    release = __import__("threading").Event()

    @registry.tool
    def wait_for_release() -> str:
        """Block until released."""
        assert release.wait(5), "the loop never ran while the tool blocked"
        return "released"

    async def release_soon() -> None:
        await asyncio.sleep(0.05)  # only runs if the tool left the loop free
        release.set()

    async with asyncio.TaskGroup() as group:
        call = group.create_task(registry.execute("wait_for_release", {}, allowed={"wait_for_release"}, context=ctx))
        group.create_task(release_soon())
    assert (call.result().content, call.result().is_error) == ("released", False)


async def test_a_sync_tool_over_its_time_limit_is_an_error_naming_the_limit(ctx: ToolContext) -> None:
    registry = ToolRegistry()
    release = __import__("threading").Event()

    @registry.tool(time_limit=0.2)
    def stuck() -> str:
        """Never finish in time."""
        release.wait(5)
        return "late"

    @registry.tool
    def raises_timeout() -> str:
        """Fail with its own TimeoutError."""
        raise TimeoutError("upstream took too long")

    try:
        result = await registry.execute("stuck", {}, allowed={"stuck"}, context=ctx)
    finally:
        release.set()
    assert result.is_error and result.metadata["timed_out"] is True
    assert "time limit of 0.2 s" in result.content and "ToolSpec.time_limit" in result.content
    own = await registry.execute("raises_timeout", {}, allowed={"raises_timeout"}, context=ctx)
    assert own.content == "tool raises_timeout failed: TimeoutError: upstream took too long"
    assert "timed_out" not in own.metadata
    assert registry.get("stuck").time_limit == 0.2  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError, match="time_limit"):
        registry.register(lambda: None, name="bad", description="x", time_limit=0)


async def test_an_inline_tool_runs_on_the_loop_and_every_other_sync_tool_off_it(ctx: ToolContext) -> None:
    import contextvars
    import threading

    registry = ToolRegistry()
    seen: dict[str, int] = {}
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")

    @registry.tool(inline=True)
    def trivial(a: int, b: int) -> int:
        """Add two integers."""
        seen["inline"] = threading.get_ident()
        marker.set("changed by the tool")
        return a + b

    @registry.tool
    def plain() -> str:
        """Not declared trivial."""
        seen["plain"] = threading.get_ident()
        return "ok"

    @registry.tool(inline=True)
    def broken() -> str:
        """Fail."""
        raise ValueError("bad input")

    result = await registry.execute("trivial", {"a": 2, "b": 3}, allowed={"trivial"}, context=ctx)
    assert (result.content, result.is_error, "duration_ms" in result.metadata) == ("5", False, True)
    await registry.execute("plain", {}, allowed={"plain"}, context=ctx)
    assert seen["inline"] == threading.get_ident() != seen["plain"]
    assert marker.get() == "unset"  # the tool ran in a copy of the context, as a thread-run tool does
    assert registry.get("trivial").inline and not registry.get("plain").inline  # type: ignore[union-attr]
    failed = await registry.execute("broken", {}, allowed={"broken"}, context=ctx)
    assert failed.is_error and failed.content == "tool broken failed: ValueError: bad input"
    # Arguments are validated and the permission gate holds exactly as for any tool.
    assert (await registry.execute("trivial", {"a": "x", "b": 1}, allowed={"trivial"}, context=ctx)).is_error
    assert (await registry.execute("trivial", {"a": 1, "b": 1}, allowed=set(), context=ctx)).is_error


async def test_a_slow_inline_tool_is_logged_as_stalling_the_loop(ctx: ToolContext, caplog: pytest.LogCaptureFixture) -> None:
    import time

    from cyber_agent.tools.registry import INLINE_WARN_SECONDS

    registry = ToolRegistry()

    @registry.tool(inline=True)
    def not_so_trivial() -> str:
        """Take longer than an inline tool may."""
        time.sleep(INLINE_WARN_SECONDS * 2)
        return "done"

    with caplog.at_level("WARNING", logger="cyber_agent.tools"):
        result = await registry.execute("not_so_trivial", {}, allowed={"not_so_trivial"}, context=ctx)
    assert result.content == "done"
    assert "inline tool not_so_trivial ran" in caplog.text and "without inline=True" in caplog.text


def test_inline_is_refused_where_it_cannot_be_trivial_and_safe() -> None:
    registry = ToolRegistry()

    async def coroutine() -> str:
        """Async."""
        return ""

    def sync() -> str:
        """Sync."""
        return ""

    with pytest.raises(ConfigurationError, match="sync functions only"):
        registry.register(coroutine, inline=True)
    with pytest.raises(ConfigurationError, match="run_in_thread"):
        registry.register(sync, inline=True, run_in_thread=True)
    with pytest.raises(ConfigurationError, match="side_effects=True cannot be inline"):
        registry.register(sync, inline=True, side_effects=True)
    with pytest.raises(ConfigurationError, match="time_limit=5 cannot apply to an inline tool"):
        registry.register(sync, inline=True, time_limit=5)
    assert registry.register(sync, inline=True).inline
