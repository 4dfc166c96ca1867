"""ToolRegistry: plain Python functions become tools the model can call (SPEC A6, T8).

A tool is an ordinary function, sync or async. Its JSON schema comes from its type hints and
defaults (through a pydantic model) and from its Google-style docstring. A parameter annotated
`ToolContext` is filled by the registry, never by the model.

`ToolRegistry.execute` is the one runtime gate: a call to a tool outside the caller's allowed
snapshot is refused before its arguments are parsed or anything is injected. A sync function
runs in a worker thread under `ToolSpec.time_limit`, so no tool blocks the event loop, unless
it declares itself trivial with `inline=True` (`ToolSpec.inline`): then it runs on the loop,
without the thread hop (~100 µs) and without a time limit.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import json
import logging
import math
import re
import time
import typing
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from cyber_agent.errors import ConfigurationError, GoalError, ToolArgumentError, ToolError, ToolRefusedError, UnknownToolError
from cyber_agent.tools.context import ToolContext
from cyber_agent.trace.goal_tool import GoalContext

__all__ = ["DEFAULT_TIME_LIMIT_SECONDS", "INLINE_WARN_SECONDS", "ToolRegistry", "ToolResult", "ToolSpec", "render_tool_output"]

F = TypeVar("F", bound=Callable[..., Any])

# OpenAI and Anthropic both accept this alphabet and length for function names.
_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARGS_HEADERS = ("args:", "arguments:", "parameters:", "params:")
_SCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAP_KEYS = ("properties", "$defs")

DEFAULT_TIME_LIMIT_SECONDS = 60.0
"""Default `ToolSpec.time_limit`: seconds a sync tool may run in its worker thread."""

INLINE_WARN_SECONDS = 0.01
"""An `inline` tool call longer than this is logged: it held the event loop (and every run on it)."""
_log = logging.getLogger("cyber_agent.tools")


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What a tool call produced, as the model will read it."""

    content: str
    """Text sent back to the model."""
    is_error: bool = False
    """True when the call was refused or failed; `content` says why."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Facts for the runner and the trace (duration_ms, truncated, exit_code, ...)."""
    data: Any = field(default=None, repr=False, compare=False)
    """The raw return value, for in-process callers; never persisted."""

    @classmethod
    def error(cls, message: str, **metadata: Any) -> ToolResult:
        """Build an error result."""
        return cls(content=message, is_error=True, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A registered tool: its schema, approval metadata and the function behind it."""

    name: str
    """Name the model calls the tool by."""
    description: str
    """What the tool does, for the model."""
    parameters: dict[str, Any]
    """JSON schema of the model-visible arguments."""
    func: Callable[..., Any] = field(repr=False)
    """The function run for a call."""
    is_async: bool
    """True when `func` is a coroutine function."""
    requires_confirmation: bool = False
    """A human must approve a batch holding a call to this tool before any of it runs (T8)."""
    editable_params: tuple[str, ...] = ()
    """Arguments a reviewer may change when approving (T8)."""
    side_effects: bool = False
    """The tool changes the world (files, processes, network); a crash mid-call is `execution_unknown`."""
    run_in_thread: bool = False
    """Kept for compatibility: every sync function runs in a worker thread unless it is `inline`."""
    inline: bool = False
    """A sync function declared trivial and safe (microseconds, never blocks: arithmetic, formatting)
    runs on the event loop instead of a worker thread; no time limit applies (a call over
    `INLINE_WARN_SECONDS` is logged: it stalled every run of the loop)."""
    time_limit: float = DEFAULT_TIME_LIMIT_SECONDS
    """Seconds a sync function may run before the call returns a tool error (the thread runs on)."""
    category: str | None = None
    """Free-form grouping label (files, shell, planning, ...)."""
    args_model: type[BaseModel] = field(repr=False)
    """Pydantic model that validates the model-given arguments."""
    context_params: tuple[str, ...] = ()
    """Parameters the registry injects with the ToolContext."""

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI function-tool entry for this tool."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate model-given arguments; return keyword arguments (ToolContext not included)."""
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"arguments of tool {self.name!r} must be a JSON object, got {type(arguments).__name__}")
        forged = sorted(set(arguments) & set(self.context_params)) if self.context_params else None
        if forged:
            # The context is the runner's; a model-supplied value is refused, not silently dropped.
            raise ToolArgumentError(
                f"argument(s) {forged} of tool {self.name!r} are supplied by the runner and cannot be passed")
        try:
            parsed = self.args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolArgumentError(_describe_validation_error(self, exc)) from None
        return {info.alias or attr: getattr(parsed, attr) for attr, info in type(parsed).model_fields.items()}

    def apply_edits(self, arguments: Mapping[str, Any], edits: Mapping[str, Any]) -> dict[str, Any]:
        """Merge a reviewer's edits into a call's arguments; refuse edits outside `editable_params`."""
        refused = sorted(set(edits) - set(self.editable_params))
        if refused:
            allowed = ", ".join(self.editable_params) or "none"
            raise ToolArgumentError(
                f"cannot edit argument(s) {refused} of tool {self.name!r}; editable: {allowed}")
        merged = {**arguments, **edits}
        self.validate(merged)
        return merged


class ToolRegistry:
    """An ordered set of tools; build one per run or per agent, never a global one."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        for spec in specs:
            self._add(spec)

    # ---- registration -------------------------------------------------------------------
    def register(
        self, func: Callable[..., Any], *, name: str | None = None, description: str | None = None,
        requires_confirmation: bool = False, editable_params: Iterable[str] = (), side_effects: bool = False,
        run_in_thread: bool = False, category: str | None = None,
        time_limit: float = DEFAULT_TIME_LIMIT_SECONDS, inline: bool = False,
    ) -> ToolSpec:
        """Register a function as a tool and return its spec."""
        spec = build_spec(
            func, name=name, description=description, requires_confirmation=requires_confirmation,
            editable_params=tuple(editable_params), side_effects=side_effects,
            run_in_thread=run_in_thread, category=category, time_limit=time_limit, inline=inline,
        )
        self._add(spec)
        return spec

    @overload
    def tool(self, func: F, /) -> F: ...
    @overload
    def tool(
        self, /, *, name: str | None = None, description: str | None = None, requires_confirmation: bool = False,
        editable_params: Iterable[str] = (), side_effects: bool = False, run_in_thread: bool = False,
        category: str | None = None, time_limit: float = DEFAULT_TIME_LIMIT_SECONDS, inline: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(self, func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register the decorated function (bare `@registry.tool` or `@registry.tool(...)`); return it unchanged."""
        def decorate(f: F) -> F:
            self.register(f, **options)
            return f

        return decorate(func) if func is not None else decorate

    def _add(self, spec: ToolSpec) -> None:
        if spec.name in self._tools:
            raise ConfigurationError(f"tool {spec.name!r}", "a tool with this name is already registered")
        self._tools[spec.name] = spec

    # ---- lookup -------------------------------------------------------------------------
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> ToolSpec | None:
        """Return the spec of a registered tool, or None."""
        return self._tools.get(name)

    def resolve(self, name: str, *, allowed: Collection[str]) -> ToolSpec:
        """Return the spec if `name` is registered and in `allowed`; else raise UnknownToolError."""
        spec = self._tools.get(name)
        if spec is None or name not in allowed:
            raise UnknownToolError(name, [n for n in self._tools if n in allowed])
        return spec

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(list(self._tools.values()))

    def copy(self) -> ToolRegistry:
        """Return an independent registry with the same tools."""
        return ToolRegistry(self._tools.values())

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """Return a registry with only the named tools (registration order kept)."""
        wanted = set(self._require(names))
        return ToolRegistry(spec for spec in self._tools.values() if spec.name in wanted)

    def schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas in registration order, for all tools or only `names`."""
        wanted = set(self._tools) if names is None else set(self._require(names))
        return [spec.schema() for spec in self._tools.values() if spec.name in wanted]

    def _require(self, names: Iterable[str]) -> list[str]:
        names = list(names)
        for name in names:
            if name not in self._tools:
                raise UnknownToolError(name, self.names())
        return names

    # ---- execution ----------------------------------------------------------------------
    async def execute(
        self, name: str, arguments: Mapping[str, Any] | None, *, allowed: frozenset[str] | set[str],
        context: ToolContext,
    ) -> ToolResult:
        """Run one tool call and return its result; refusals and failures are error results."""
        try:
            # The permission gate comes first: nothing of an unexposed call is parsed or injected.
            spec = self.resolve(name, allowed=allowed)
            kwargs = spec.validate({} if arguments is None else arguments)
        except ToolError as exc:
            return ToolResult.error(str(exc))
        snapshot = frozenset(allowed)
        if context.allowed_tools != snapshot:
            # Tools see the snapshot this call was dispatched under, whatever the context carried.
            context = dataclasses.replace(context, allowed_tools=snapshot)
        for param in spec.context_params:
            kwargs[param] = context
        started = time.perf_counter()
        try:
            if spec.is_async:
                value = await spec.func(**kwargs)
            elif spec.inline:
                # Declared trivial: on the loop, in a copy of the context as the thread path runs it.
                value = contextvars.copy_context().run(spec.func, **kwargs)
                if (took := time.perf_counter() - started) > INLINE_WARN_SECONDS:
                    _log.warning("inline tool %s ran %.0f ms on the event loop (limit %.0f ms); register it without "
                                 "inline=True so it runs in a worker thread", name, took * 1000, INLINE_WARN_SECONDS * 1000)
            else:
                # Off the loop, so a slow walk or a blocking read stalls only this call. A thread
                # cannot be killed: on timeout it runs on, so CPU-heavy tools bound themselves too.
                value = await _run_in_thread(spec, kwargs)
                if value is _TIMED_OUT:
                    return ToolResult.error(
                        f"tool {name} did not finish within its time limit of {spec.time_limit:g} s "
                        "(ToolSpec.time_limit); call it with a smaller input",
                        duration_ms=_elapsed_ms(started), timed_out=True)
            if inspect.isawaitable(value):
                value = await value
        except ToolRefusedError as exc:
            return ToolResult.error(str(exc), duration_ms=_elapsed_ms(started), refused=exc.limit)
        except (ToolError, GoalError) as exc:
            return ToolResult.error(str(exc), duration_ms=_elapsed_ms(started))
        except Exception as exc:  # noqa: BLE001 - a failing tool must never crash the run loop
            message = f"tool {name} failed: {type(exc).__name__}: {exc}"
            return ToolResult.error(message, duration_ms=_elapsed_ms(started))
        if isinstance(value, ToolResult):
            return dataclasses.replace(value, metadata={**value.metadata, "duration_ms": _elapsed_ms(started)})
        return ToolResult(content=render_tool_output(value), metadata={"duration_ms": _elapsed_ms(started)}, data=value)


_TIMED_OUT = object()


async def _run_in_thread(spec: ToolSpec, kwargs: dict[str, Any]) -> Any:
    """Run a sync tool in a worker thread; return `_TIMED_OUT` when it outlives `spec.time_limit`."""
    # What asyncio.to_thread does, as a plain future: the tool's own TimeoutError must stay an
    # ordinary failure, so the limit is told apart by `asyncio.wait`, not by `wait_for`.
    call = functools.partial(contextvars.copy_context().run, spec.func, **kwargs)
    future = asyncio.get_running_loop().run_in_executor(None, call)
    try:
        done, _ = await asyncio.wait({future}, timeout=spec.time_limit)
    finally:
        future.cancel()  # a no-op once done; otherwise the late result is dropped, not logged
    if not done:
        return _TIMED_OUT
    return future.result()


def render_tool_output(value: Any) -> str:
    """Render a tool's return value as text: str as is, None as '(no output)', anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return pydantic_core.to_json(value, fallback=str).decode()


def build_spec(
    func: Callable[..., Any], *, name: str | None = None, description: str | None = None,
    requires_confirmation: bool = False, editable_params: tuple[str, ...] = (), side_effects: bool = False,
    run_in_thread: bool = False, category: str | None = None, time_limit: float = DEFAULT_TIME_LIMIT_SECONDS,
    inline: bool = False,
) -> ToolSpec:
    """Derive a ToolSpec from a function's signature, type hints and docstring.

    Specs are frozen, so one is built per (plain function, options) and reused: registering the
    same module-level function in every run's fresh registry costs a lookup, not a model build.
    """
    options = (name, description, requires_confirmation, tuple(editable_params), side_effects, run_in_thread,
               category, time_limit, inline)
    if not (inspect.isfunction(func) and func.__closure__ is None):
        return _build_spec(func, *options)  # closures and bound methods: the cache would keep their state alive
    return _cached_spec(func, *options)


@functools.lru_cache(maxsize=1024)
def _cached_spec(func: Callable[..., Any], *options: Any) -> ToolSpec:
    return _build_spec(func, *options)


def _build_spec(
    func: Callable[..., Any], name: str | None, description: str | None, requires_confirmation: bool,
    editable_params: tuple[str, ...], side_effects: bool, run_in_thread: bool, category: str | None,
    time_limit: float, inline: bool = False,
) -> ToolSpec:
    name = name or str(getattr(func, "__name__", ""))
    if not _NAME_RE.match(name):
        raise ConfigurationError(f"tool {name!r}", "names must match [A-Za-z0-9_-]{1,64}; pass name=")
    is_async = inspect.iscoroutinefunction(func)
    if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
        raise ConfigurationError(f"tool {name!r}", "generator functions cannot be tools; return a value")
    if is_async and run_in_thread:
        raise ConfigurationError(f"tool {name!r}", "run_in_thread applies to sync functions only")
    if not (isinstance(time_limit, (int, float)) and 0 < time_limit <= math.inf):
        raise ConfigurationError(f"tool {name!r}", f"time_limit must be a number of seconds > 0, got {time_limit!r}")
    if inline:
        _check_inline(name, is_async=is_async, run_in_thread=run_in_thread, side_effects=side_effects,
                      time_limit=time_limit)
    doc_description, param_docs = parse_docstring(inspect.getdoc(func) or "")
    description = (description or doc_description).strip()
    if not description:
        raise ConfigurationError(f"tool {name!r}", "no description: add a docstring or pass description=")
    try:
        # ToolContext is offered to the resolver so modules may import it under TYPE_CHECKING only.
        hints = typing.get_type_hints(func, localns={"ToolContext": ToolContext}, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ConfigurationError(f"tool {name!r}", f"cannot resolve type hints: {exc}") from None
    fields: dict[str, Any] = {}
    context_params: list[str] = []
    for index, param in enumerate(inspect.signature(func).parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigurationError(
                f"tool {name!r}", f"parameter {param.name!r}: tools take named parameters only (no *args, **kwargs or /)")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_params.append(param.name)
            continue
        default = ... if param.default is param.empty else param.default
        # Internal field names avoid clashes with BaseModel attributes and leading underscores.
        fields[f"p{index}"] = (annotation, Field(default, alias=param.name, description=param_docs.get(param.name)))
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    visible = [info.alias for info in model.model_fields.values()]
    bad = [p for p in editable_params if p not in visible]
    if bad:
        raise ConfigurationError(
            f"tool {name!r}", f"editable_params {bad} are not parameters the model passes; parameters: {visible}")
    if editable_params and not requires_confirmation:
        raise ConfigurationError(f"tool {name!r}", "editable_params only apply with requires_confirmation=True")
    try:
        parameters = _strip_titles(model.model_json_schema())
    except Exception as exc:  # noqa: BLE001 - pydantic raises several types for unschematizable hints
        raise ConfigurationError(f"tool {name!r}", f"cannot build a JSON schema: {exc}") from None
    return ToolSpec(
        name=name, description=description, parameters=parameters, func=func, is_async=is_async,
        requires_confirmation=requires_confirmation, editable_params=editable_params, side_effects=side_effects,
        run_in_thread=run_in_thread, category=category, time_limit=float(time_limit), args_model=model,
        context_params=tuple(context_params), inline=bool(inline),
    )


def _check_inline(name: str, *, is_async: bool, run_in_thread: bool, side_effects: bool, time_limit: float) -> None:
    """Refuse `inline=True` where it cannot mean "trivial and safe on the loop"."""
    if is_async:
        raise ConfigurationError(f"tool {name!r}", "inline applies to sync functions only (an async tool already runs on the loop)")
    if run_in_thread:
        raise ConfigurationError(f"tool {name!r}", "inline and run_in_thread contradict each other; pass one")
    if side_effects:
        raise ConfigurationError(f"tool {name!r}", "a tool with side_effects=True cannot be inline: it runs in a worker "
                                                   "thread, so a blocking call never stalls the loop")
    if time_limit != DEFAULT_TIME_LIMIT_SECONDS:
        raise ConfigurationError(f"tool {name!r}", f"time_limit={time_limit!r} cannot apply to an inline tool (it runs on "
                                                   "the loop and cannot be interrupted); drop inline=True to keep the limit")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (first paragraph, {parameter: description})."""
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or line.strip().lower() in _ARGS_HEADERS:
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    start = next((i for i, line in enumerate(lines) if line.strip().lower() in _ARGS_HEADERS), None)
    if start is None:
        return " ".join(summary), params
    current: str | None = None
    item_indent: int | None = None
    for line in lines[start + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            break  # the next section (Returns:, Raises:, ...) starts
        if item_indent is None:
            item_indent = indent
        match = re.match(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line.strip())
        if indent == item_indent and match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(summary), params


CONTEXT_VIEWS: tuple[type, ...] = (GoalContext,)
"""Structural views of ToolContext a lower package declares (it cannot import `tools/`); injected like it."""


def _is_context(annotation: Any) -> bool:
    if annotation is ToolContext or annotation in CONTEXT_VIEWS:
        return True
    args = typing.get_args(annotation)
    # `ToolContext | None` is injected too; anything else mentioning it is a definition error.
    return bool(args) and ToolContext in args and all(a in (ToolContext, type(None)) for a in args)


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated titles: noise for the model (property names stay intact)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    for key in _SCHEMA_MAP_KEYS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _strip_titles(v) for k, v in out[key].items()}
    for key in _SCHEMA_LIST_KEYS:
        if isinstance(out.get(key), list):
            out[key] = [_strip_titles(v) for v in out[key]]
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strip_titles(out[key])
    return out


def _describe_validation_error(spec: ToolSpec, exc: ValidationError) -> str:
    properties = spec.parameters.get("properties", {})
    lines = [f"invalid arguments for tool {spec.name!r}:"]
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        detail = error["msg"]
        if error["type"] == "extra_forbidden":
            accepted = _accepted_fields(spec.parameters, error["loc"]) if len(error["loc"]) > 1 else list(properties)
            detail = f"unexpected argument; accepted: {', '.join(accepted) or 'none'}"
        elif error["type"] != "missing":
            detail += f" (got {_short(error.get('input'))})"
        expected = _expected_type(properties.get(str(error["loc"][0]))) if error["loc"] else None
        if expected and error["type"] != "extra_forbidden":
            detail += f"; expected {expected}"
        lines.append(f"- {loc}: {detail}")
    return "\n".join(lines)


def _accepted_fields(schema: dict[str, Any], loc: tuple[Any, ...]) -> list[str]:
    """Fields of the nested model an unexpected key was found in (union branches name it in `loc`)."""
    defs = schema.get("$defs", {})
    for part in reversed(loc[:-1]):
        name = str(part).removeprefix("list[").removesuffix("]")
        if name in defs:
            return list(defs[name].get("properties", {}))
    return list(schema.get("properties", {}))


def _expected_type(prop: dict[str, Any] | None) -> str | None:
    if not prop:
        return None
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "type" in prop:
        return str(prop["type"])
    options = [_expected_type(p) for p in prop.get("anyOf", [])]
    if options and all(options):
        return " or ".join(o for o in options if o)
    if "$ref" in prop:
        return "object " + str(prop["$ref"]).rsplit("/", 1)[-1]
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
