"""Scorers: how a sweep turns a cell's answer into a score (exact, numeric, regex, callable, model-graded).

Every scorer has a `name` (recorded per cell: a changed scorer re-scores finished cells
without re-running them) and an async `score(task, answer, ctx)` returning a `Score`. The
four built-ins are pydantic models with a `kind` tag, so a TOML grid or a task file can name
them (`ScorerSpec`); any object with the same two members works in Python, and
`CallableScorer` wraps a plain function.
"""

from __future__ import annotations

import inspect
import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from cyber_agent.errors import ConfigurationError

if TYPE_CHECKING:
    from cyber_agent.experiments.tasks import SweepTask
    from cyber_agent.llm.resolve import ResolvedModel
    from cyber_agent.llm.types import LLMCall
    from cyber_agent.trace.protocols import TraceStore

__all__ = [
    "CallableScorer",
    "ExactScorer",
    "ModelGradedScorer",
    "NumericScorer",
    "RegexScorer",
    "Score",
    "ScoreContext",
    "Scorer",
    "ScorerSpec",
]

_GRADE = re.compile(r"GRADE:\s*(CORRECT|INCORRECT)", re.I)
_NAMESPACE = uuid.UUID("5b0c6d2e-9a51-4c1e-8f3b-19e7a2d4c6f0")


class Score(BaseModel):
    """What a scorer concluded about one answer."""

    value: float = Field(ge=0.0, le=1.0)
    """Score in 0..1 (1 for a correct answer under the built-ins)."""
    passed: bool
    """Whether the answer counts as correct."""
    explanation: str = ""
    """Why, in one line."""
    grader_trace_id: str | None = None
    """The grading run's root trace (model-graded scorers only)."""


def _identity(resolved: ResolvedModel) -> LLMCall:
    return resolved.llm_call


@dataclass(frozen=True, kw_only=True)
class ScoreContext:
    """What a scorer may use besides the task and the answer."""

    store: TraceStore
    """The sweep's store (a model-graded scorer writes its grading run there)."""
    trace_id: str
    """The cell attempt's root trace."""
    workspace: str | None = None
    """The sweep's workspace."""
    wrap_model: Callable[[ResolvedModel], LLMCall] = field(default=_identity)
    """Puts a grader's model behind the sweep's rate limits."""


@runtime_checkable
class Scorer(Protocol):
    """Anything with a name and an async `score`."""

    @property
    def name(self) -> str:
        """A stable name: recorded with the score; a different name means re-score."""
        ...

    async def score(self, task: SweepTask, answer: str | None, ctx: ScoreContext) -> Score:
        """Score one answer."""
        ...


def _normalise(text: str) -> str:
    return " ".join(text.strip().rstrip(".").casefold().split())


class ExactScorer(BaseModel):
    """Correct when the answer equals the expected answer (case, outer spaces and a final period ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["exact"] = "exact"
    normalise: bool = True
    """Compare case-folded, with runs of spaces collapsed and a trailing period dropped."""

    @property
    def name(self) -> str:
        """`exact` or `exact(raw)`."""
        return "exact" if self.normalise else "exact(raw)"

    async def score(self, task: SweepTask, answer: str | None, ctx: ScoreContext) -> Score:
        """1 when the answer is the expected one, else 0."""
        expected = task.expected or ""
        same = answer is not None and (_normalise(answer) == _normalise(expected) if self.normalise else answer == expected)
        return Score(value=float(same), passed=same, explanation="matches" if same else f"expected {expected!r}")


class NumericScorer(BaseModel):
    """Correct when the number read from the answer is within `tolerance` of the expected number."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["numeric"] = "numeric"
    tolerance: float = Field(default=1e-6, ge=0.0)
    """Largest accepted difference."""
    relative: bool = False
    """Compare |answer - expected| with tolerance × |expected| instead."""
    pattern: str | None = None
    """Regex whose first group (or whole match) is the number; None reads the last number of the answer."""

    @property
    def name(self) -> str:
        """`numeric(...)` with its settings."""
        return f"numeric(tolerance={self.tolerance:g},relative={self.relative},pattern={self.pattern!r})"

    async def score(self, task: SweepTask, answer: str | None, ctx: ScoreContext) -> Score:
        """1 when the answer's number is close enough to the expected one, else 0."""
        try:
            expected = float(task.expected or "")
        except ValueError:
            raise ConfigurationError(f"task {task.id}.expected", f"{task.expected!r} is not a number; a numeric scorer needs one") from None
        text = answer or ""
        if self.pattern is not None:
            found = re.search(self.pattern, text)
            raw = (found.group(1) if found and found.groups() else found.group(0) if found else None)
        else:
            numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
            raw = numbers[-1] if numbers else None
        if raw is None:
            return Score(value=0.0, passed=False, explanation="no number found in the answer")
        try:
            got = float(raw)
        except ValueError:
            return Score(value=0.0, passed=False, explanation=f"{raw!r} is not a number")
        limit = self.tolerance * abs(expected) if self.relative else self.tolerance
        ok = abs(got - expected) <= limit
        return Score(value=float(ok), passed=ok, explanation=f"read {got:g}, expected {expected:g}")


class RegexScorer(BaseModel):
    """Correct when the pattern (or, without one, the expected answer as a pattern) is found in the answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["regex"] = "regex"
    pattern: str | None = None
    """The regex; None uses the task's expected answer as the regex."""
    ignore_case: bool = True
    """Match case-insensitively."""

    @property
    def name(self) -> str:
        """`regex(...)` with its pattern."""
        return f"regex({self.pattern!r},ignore_case={self.ignore_case})"

    async def score(self, task: SweepTask, answer: str | None, ctx: ScoreContext) -> Score:
        """1 when the pattern is found, else 0."""
        pattern = self.pattern if self.pattern is not None else (task.expected or "")
        try:
            found = re.search(pattern, answer or "", re.I if self.ignore_case else 0) is not None
        except re.error as exc:
            raise ConfigurationError("scorer.pattern", f"{pattern!r} is not a valid regex ({exc})") from None
        return Score(value=float(found), passed=found, explanation="pattern found" if found else f"{pattern!r} not found")


class ModelGradedScorer(BaseModel):
    """Ask a model whether the answer states the expected one, in a grading run of its own (a root trace)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["model"] = "model"
    model: str = "demo"
    """The grader's model spec (`demo` grades offline)."""
    max_iterations: int = Field(default=3, ge=1)
    """Model turns the grading run may take."""

    @property
    def name(self) -> str:
        """`model(<spec>)`."""
        return f"model({self.model})"

    async def score(self, task: SweepTask, answer: str | None, ctx: ScoreContext) -> Score:
        """Run the grader like a validator (no tools, its own trace) and read its `GRADE:` line."""
        from cyber_agent.core.config import RunConfig
        from cyber_agent.core.runner import AgentRunner
        from cyber_agent.llm.demo_checks import grading_request
        from cyber_agent.llm.resolve import resolve_llm

        resolved = resolve_llm(self.model)
        grader_id = str(uuid.uuid5(_NAMESPACE, f"{ctx.trace_id}/{self.name}"))
        runner = AgentRunner(trace_store=ctx.store, llm_call=ctx.wrap_model(resolved), workspace=ctx.workspace)
        config = RunConfig(model=resolved.model, agent_type="grader", agent_mode="legacy", tools=[],
                           max_iterations=self.max_iterations, new_trace_id=grader_id, name=f"grade {task.id}",
                           context={"graded_trace_id": ctx.trace_id})
        request = grading_request(task.prompt, task.expected or "", answer or "")
        result = await runner.run_result([{"role": "user", "content": request}], config)
        reply = result.answer or ""
        verdict = _GRADE.search(reply)
        if verdict is None:
            return Score(value=0.0, passed=False, grader_trace_id=grader_id,
                         explanation=f"the grader's reply has no GRADE line ({result.status}): {reply[:120]!r}")
        ok = verdict.group(1).upper() == "CORRECT"
        reason = reply[verdict.end():].strip().splitlines()
        return Score(value=float(ok), passed=ok, grader_trace_id=grader_id, explanation=reason[0] if reason else "")


ScorerSpec = Annotated[ExactScorer | NumericScorer | RegexScorer | ModelGradedScorer, Field(discriminator="kind")]
"""A built-in scorer as a task file or TOML grid names it: `{kind = "numeric", tolerance = 0.005}`."""

ScoreFunction = Callable[["SweepTask", str | None], "bool | float | Score | Awaitable[bool | float | Score]"]


@dataclass(frozen=True)
class CallableScorer:
    """A scorer from a function `fn(task, answer)` returning a bool, a float in 0..1 or a Score (or awaiting one)."""

    fn: ScoreFunction
    """The function; define it at module level when the sweep runs on processes or Ray (it is pickled)."""
    label: str | None = None
    """Name recorded with the score; default `callable:<module>.<qualname>`."""

    @property
    def name(self) -> str:
        """The label, or the function's qualified name."""
        return self.label or f"callable:{getattr(self.fn, '__module__', '?')}.{getattr(self.fn, '__qualname__', repr(self.fn))}"

    async def score(self, task: SweepTask, answer: str | None, ctx: ScoreContext) -> Score:
        """Call the function and turn what it returns into a Score."""
        value = self.fn(task, answer)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, Score):
            return value
        if isinstance(value, bool):
            return Score(value=float(value), passed=value)
        if isinstance(value, (int, float)) and 0.0 <= float(value) <= 1.0:
            return Score(value=float(value), passed=float(value) >= 1.0)
        raise ConfigurationError(self.name, f"returned {json.dumps(repr(value))}; return a bool, a float in 0..1 or a Score")
