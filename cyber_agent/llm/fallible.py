"""The fallible offline model: the demo model with seeded mistakes, for methodology work.

`FallibleModel` answers every request as `cyber_agent/llm/demo.py:DemoModel` does, then, at
each *answer point*, makes a mistake with the error rate of the task's type: one number of the
answer is changed. Answer points are an agent's final text (legacy answers, the recursive
root's candidate answer) and a recursive child's `submit_report`. Validators, reviewers,
graders and summaries are never corrupted, so in recursive mode a validator catches the wrong
number, the parent sends the report back (or the root validator the answer), and the next
attempt draws again. In legacy mode nothing checks, and the wrong number is the answer.

Every draw is a pure function of (seed, task type, the agent's own task, attempt): the same
seed gives the same mistakes in every process and on every re-run. The demo's scripted
first-read shortcut (`cyber_agent/llm/demo_recursive.py:FIRST_READ_LINES`) is dropped: the
fallible model reads whole files, so its errors come from the draws alone.

Task types (`task_type`): `arithmetic` (an expression to compute), `lookup` (one region's
revenue from a CSV), `report` (revenue per region), `other`. Usage is priced at
`usd_per_million_tokens` (a made-up price, so cost charts have something to show) and
reported as the provider's charge.

Spec strings (`cyber_agent/llm/resolve.py:resolve_llm`): `fallible` (no errors),
`fallible:0.3` (rate 0.3 for every type), `fallible:rate=0.1,lookup=0.4,seed=7,latency=0.05,price=2`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.demo import DemoModel
from cyber_agent.llm.demo_checks import GRADING_HEADER, NUMBER
from cyber_agent.llm.demo_recursive import FIRST_READ_LINES
from cyber_agent.llm.types import DeltaCallback, LLMResponse

__all__ = ["FallibleModel", "TaskType", "parse_fallible_spec", "task_type"]

TaskType = Literal["arithmetic", "lookup", "report", "other"]
"""What kind of task an agent works on; each type may have its own error rate."""

_TYPES: tuple[str, ...] = get_args(TaskType)
_CSV = re.compile(r"(?<![\w./-])[\w./-]+\.csv")
_REGION = re.compile(r"region\s+['\"]?([A-Z][\w-]*)")
_EXPRESSION = re.compile(r"\d[\d\s.()]*[+\-*/%][\d\s.+\-*/()%]*[\d)]")
_RESULT = re.compile(r"(?:=|revenue)\s*(-?\d+(?:\.\d+)?)")
_FEEDBACK = re.compile(r"\[parent review\] Revise|\[root validator\] Your answer was not accepted")
_NEVER_CORRUPTED = frozenset({"submit_validation", "review_task"})
_SEED_MIX = 1_000_003  # a prime: (own seed, repeat seed) pairs map to distinct seeds for any realistic repeat count
_SPEC_KEYS = {"rate": "error_rate", "seed": "seed", "latency": "latency", "price": "usd_per_million_tokens"}


def task_type(task: str) -> TaskType:
    """Classify an agent's task: arithmetic, lookup (one region), report (per region) or other."""
    lowered = task.lower()
    if _CSV.search(task):
        if "per region" in lowered or "every region" in lowered:
            return "report"
        if _REGION.search(task):
            return "lookup"
    if _EXPRESSION.search(task):
        return "arithmetic"
    return "other"


def parse_fallible_spec(rest: str) -> dict[str, Any]:
    """Constructor options from the part of a spec after `fallible:` (`0.3` or `rate=0.3,lookup=0.5,seed=7`)."""
    rest = rest.strip()
    if not rest:
        return {}
    options: dict[str, Any] = {}
    rates: dict[str, float] = {}
    for part in (p.strip() for p in rest.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        key, value = (key.strip(), value.strip()) if sep else ("rate", key.strip())
        try:
            number = float(value)
        except ValueError:
            raise ConfigurationError(f"fallible:{key}", f"{value!r} is not a number (spec {rest!r})") from None
        if key in _TYPES:
            rates[key] = number
        elif key in _SPEC_KEYS:
            options[_SPEC_KEYS[key]] = int(number) if key == "seed" else number
        else:
            known = ", ".join([*_SPEC_KEYS, *_TYPES])
            raise ConfigurationError(f"fallible:{key}", f"is not an option of the fallible model; use one of {known}")
    if rates:
        options["error_rates"] = rates
    return options


def _check_rate(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ConfigurationError(name, f"must be between 0 and 1, got {value!r}")
    return float(value)


class FallibleModel:
    """An `LLMCall` that answers like the demo model and errs at a seeded rate per task type."""

    def __init__(
        self,
        error_rate: float = 0.0,
        *,
        error_rates: Mapping[str, float] | None = None,
        seed: int = 0,
        latency: float = 0.0,
        usd_per_million_tokens: float = 1.0,
        name: str = "fallible",
    ) -> None:
        unknown = sorted(set(error_rates or {}) - set(_TYPES))
        if unknown:
            raise ConfigurationError("error_rates", f"unknown task type {unknown[0]!r}; use {', '.join(_TYPES)}")
        if latency < 0 or usd_per_million_tokens < 0:
            raise ConfigurationError("latency" if latency < 0 else "usd_per_million_tokens", "must be >= 0")
        self.error_rate = _check_rate("error_rate", error_rate)
        self.error_rates = {k: _check_rate(f"error_rates.{k}", v) for k, v in (error_rates or {}).items()}
        self.seed = int(seed)
        self.latency = float(latency)
        self.usd_per_million_tokens = float(usd_per_million_tokens)
        self.name = name
        self._demo = DemoModel(name, latency=latency)  # the demo model waits (and checks the value)

    def __repr__(self) -> str:
        return f"FallibleModel(error_rate={self.error_rate}, error_rates={self.error_rates}, seed={self.seed})"

    def rate_for(self, kind: TaskType) -> float:
        """The error rate of a task type."""
        return self.error_rates.get(kind, self.error_rate)

    def with_seed(self, seed: int) -> FallibleModel:
        """The same model drawing from `seed` mixed with its own (a sweep gives each repeat its own seed)."""
        return FallibleModel(self.error_rate, error_rates=self.error_rates, seed=self.seed * _SEED_MIX + seed,
                             latency=self.latency, usd_per_million_tokens=self.usd_per_million_tokens, name=self.name)

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str = "fallible",
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Answer as the demo model does, with this model's seeded mistakes at answer points."""
        response = await self._demo(messages, model, tools, temperature)
        names = {t["function"]["name"] for t in tools or []}
        first = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        exempt = names & _NEVER_CORRUPTED or first.startswith(GRADING_HEADER) or "--- BEGIN" in first
        if not exempt:
            response = self._fallible(response, messages, first, names)
        if on_delta is not None and response.content:
            on_delta(response.content)
        tokens = response.usage.prompt_tokens + response.usage.completion_tokens
        cost = tokens * self.usd_per_million_tokens / 1_000_000
        return response.model_copy(update={"cost": cost, "usage": response.usage.model_copy(update={"cost_usd": cost})})

    def _fallible(self, response: LLMResponse, messages: list[dict[str, Any]], first: str, names: set[str]) -> LLMResponse:
        if "submit_report" in names:
            response = _whole_reads(response)
        objective = re.search(r"^Objective: (.*)$", first, re.M) if "# Task brief" in first else None
        own_task = objective.group(1) if objective else first  # a brief's text holds trace ids; its objective does not
        kind = task_type(own_task)
        rate = self.rate_for(kind)
        if rate <= 0 or kind == "other":
            return response
        attempt = sum(len(_FEEDBACK.findall(str(m.get("content") or ""))) for m in messages if m.get("role") == "user")
        rng = random.Random(f"{self.seed}|{kind}|{own_task}|{attempt}")
        if rng.random() >= rate:
            return response
        return _corrupted(response, rng)


def _whole_reads(response: LLMResponse) -> LLMResponse:
    """Drop the demo's scripted first-read limit: a fallible child reads the whole file."""
    calls = [
        call.model_copy(update={"arguments": {k: v for k, v in call.arguments.items() if k != "limit"}})
        if call.name == "read_file" and call.arguments.get("limit") == FIRST_READ_LINES else call
        for call in response.tool_calls
    ]
    return response.model_copy(update={"tool_calls": calls})


def _wrong(value: str, rng: random.Random) -> str:
    decimals = len(value.split(".", 1)[1]) if "." in value else 0
    number = float(value)
    step = 10 ** max(0, len(str(int(abs(number)))) - 2)
    delta = rng.choice((-1, 1)) * rng.randint(1, 9) * step
    return f"{number + delta:.{decimals}f}"


def _swap(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\d.]){re.escape(old)}(?![\d.])", new, text)


def _corrupted(response: LLMResponse, rng: random.Random) -> LLMResponse:
    """The response with its result number replaced by a wrong one (or unchanged when it states none)."""
    report = next((c for c in response.tool_calls if c.name == "submit_report"), None)
    if report is not None:
        outputs = [str(o) for o in report.arguments.get("outputs") or []]
        found = _RESULT.search("\n".join(outputs)) or _RESULT.search(str(report.arguments.get("summary") or ""))
        if found is None:
            return response
        old, new = found.group(1), _wrong(found.group(1), rng)
        arguments = {**report.arguments, "outputs": [_swap(o, old, new) for o in outputs],
                     "summary": _swap(str(report.arguments.get("summary") or ""), old, new)}
        calls = [c.model_copy(update={"arguments": arguments}) if c is report else c for c in response.tool_calls]
        return response.model_copy(update={"tool_calls": calls})
    if response.tool_calls or not response.content:
        return response
    text = response.content
    found = _RESULT.search(text)
    spans = [(found.start(1), found.end(1))] if found else [m.span() for m in NUMBER.finditer(text)][-1:]
    if not spans:
        return response
    start, end = spans[0]
    return response.model_copy(update={"content": text[:start] + _wrong(text[start:end], rng) + text[end:]})
