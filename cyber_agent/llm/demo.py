"""The offline `demo` model: deterministic, rule-based, and correct on the demo tasks.

It reads the task, the tool schemas and the conversation, and drives real work with the real
tools: it plans with `goal`, reads files, delegates to sub-agents with `agent`, computes with
`evaluate`, and answers from what the tools returned. Nothing it answers is canned: numbers
come from the files the tools read. Tasks it does not recognise get an honest reply that says
what it can do.

The tasks it recognises, in both modes, are listed in one place: docs/notebook.md, "The demo
model" (the table there is what `_decide` and `demo_recursive.recursive_step` dispatch on).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.demo_checks import GRADING_HEADER, grade_reply
from cyber_agent.llm.pricing import ModelPrice, compute_cost, lookup_price
from cyber_agent.llm.types import DeltaCallback, LLMResponse, ToolCall, Usage

__all__ = ["DemoModel"]

# A path starts at a token boundary: without the lookbehind the scan restarts at every character
# of a long token and is quadratic (40 KB of letters took 16 s).
_CSV_PATH = re.compile(r"(?<![\w./-])[\w./-]+\.csv")
_REGION = re.compile(r"region\s+['\"]?([A-Z][\w-]*)")
_ARITH = re.compile(r"(\d[\d\s.+\-*/()%]*[\d)])")
_LINE_PREFIX = re.compile(r"^\s*\d+\s*[:|\t]\s?")


@dataclass
class _State:
    task: str
    tools: set[str]
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    turn: int = 0
    all_user_text: str = ""

    def results(self, name: str) -> list[str]:
        return [result for tool, _, result in self.calls if tool == name]

    def made(self, name: str, **match: Any) -> bool:
        return any(tool == name and all(args.get(k) == v for k, v in match.items()) for tool, args, _ in self.calls)


class DemoModel:
    """An `LLMCall` that needs no network: `DemoModel()(messages, "demo", tools)`.

    `latency` (seconds, also `model="demo:latency=0.2"`) makes each reply wait as a provider's
    would: the event loop runs meanwhile, so live progress has something to show. `price_as`
    (`model="demo:price_as=gpt-4o-mini"`) prices its (estimated) tokens at a real model's list
    price, flagged `cost_estimated`: simulated costs, so cost charts have something to chart.
    """

    def __init__(self, name: str = "demo", latency: float | str = 0.0, price_as: str | None = None) -> None:
        self.name = name
        self.price: ModelPrice | None = None
        """The list price its replies are charged at (None: free)."""
        if price_as:
            self.price = lookup_price(price_as)
            if self.price is None:
                raise ConfigurationError("price_as", f"{price_as!r} is not in the price table; name a priced model, "
                                                     "e.g. 'demo:price_as=gpt-4o-mini' (cyber_agent/llm/pricing.py)")
        try:
            seconds = float(latency)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or not 0.0 <= seconds <= 60.0:
            raise ConfigurationError("latency", f"must be a number of seconds between 0 and 60, got {latency!r} "
                                                "(e.g. model='demo:latency=0.2')")
        self.latency = seconds
        """Seconds each reply waits before it is returned."""

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str = "demo",
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Decide the next step from the conversation so far."""
        if self.latency:
            await asyncio.sleep(self.latency)
        size = sum(len(str(m.get("content") or "")) for m in messages)
        if size > _INLINE_CHARS:  # a big request is decided off the event loop: the server's GETs keep flowing
            text, calls, turn = await asyncio.to_thread(_next_step, messages, tools or [])
        else:
            text, calls, turn = _next_step(messages, tools or [])
        if on_delta is not None and text:
            on_delta(text)
        return self._response(messages, text, calls, turn)

    def _response(self, messages: list[dict[str, Any]], text: str, calls: list[tuple[str, dict[str, Any]]],
                  turn: int) -> LLMResponse:
        tool_calls = [ToolCall(id=f"call_{turn}_{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
        prompt = sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or [])) for m in messages)
        completion = len(text) + len(json.dumps([c.arguments for c in tool_calls]))
        usage = Usage(prompt_tokens=prompt // 4 + 1, completion_tokens=completion // 4 + 1)
        cost = 0.0 if self.price is None else compute_cost("priced", usage, {"priced": self.price})[0]
        return LLMResponse(
            content=text, tool_calls=tool_calls, model=self.name, cost=cost, cost_estimated=self.price is not None,
            usage=usage.model_copy(update={"cost_usd": cost}),
            finish_reason="tool_calls" if tool_calls else "stop",
        )


_INLINE_CHARS = 4096
"""Requests up to this many characters are decided on the event loop (microseconds); bigger ones in a thread."""


def _next_step(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[str, list[tuple[str, dict[str, Any]]], int]:
    """The reply text, tool calls and turn number for this request (pure: safe in a worker thread)."""
    digest = _digest_request(messages)
    state = _read_state(messages, tools)
    text, calls = (digest, []) if digest is not None else _decide(state)
    return text, calls, state.turn


def _digest_request(messages: list[dict[str, Any]]) -> str | None:
    """Summarizer and compaction requests get an extractive digest (the demo model cannot paraphrase)."""
    user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    match = re.search(r"--- BEGIN(?: HISTORY)? ---\n(.*)\n--- END(?: HISTORY)? ---", user, re.S)
    if match is None:
        return None
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    head = lines[:20]
    rest = len(lines) - len(head)
    return "\n".join(["Extractive digest (first lines kept verbatim):", *head] + ([f"[... {rest} more lines not kept]"] if rest > 0 else []))


def _read_state(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> _State:
    task = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    state = _State(task=task, tools={t["function"]["name"] for t in tools})
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    state.all_user_text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    for message in messages:
        if message.get("role") == "assistant":
            state.turn += 1
            for call in message.get("tool_calls") or []:
                fn = call["function"]
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except json.JSONDecodeError:
                    args = {}
                pending[call["id"]] = (fn["name"], args)
        elif message.get("role") == "tool" and message.get("tool_call_id") in pending:
            name, args = pending.pop(message["tool_call_id"])
            state.calls.append((name, args, str(message.get("content") or "")))
    return state


def _decide(state: _State) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    from cyber_agent.llm.demo_recursive import recursive_step

    task = state.task
    if task.startswith(GRADING_HEADER):
        return grade_reply(task), []
    csv = _CSV_PATH.search(task)
    step = recursive_step(state, _rows, csv.group(0) if csv else None)
    if step is not None:
        return step
    lowered = task.lower()
    if csv and "per region" in lowered:
        return _region_report(state, csv.group(0))
    region = _REGION.search(task)
    if csv and region:
        return _one_region(state, csv.group(0), region.group(1))
    arith = _ARITH.search(task)
    if arith and any(op in arith.group(1) for op in "+-*/%") and "evaluate" in state.tools:
        return _arithmetic(state, arith.group(1).strip())
    return (
        "I am the offline demo model. I can report revenue per region from a CSV file in data/, "
        "compute one region's revenue, or evaluate an arithmetic expression. Configure a real "
        "provider (openai:..., anthropic:...) for other tasks.",
        [],
    )


def _rows(text: str) -> list[dict[str, str]]:
    lines = [_LINE_PREFIX.sub("", line).strip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if "region" in line and "units" in line and "," in line), None)
    if header_at is None:
        return []
    header = [h.strip() for h in lines[header_at].split(",")]
    rows = []
    for line in lines[header_at + 1 :]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == len(header):
            rows.append(dict(zip(header, parts)))
    return rows


def _revenue_expression(rows: list[dict[str, str]], region: str) -> str:
    terms = [f"{r['units']} * {r['unit_price']}" for r in rows if r.get("region") == region]
    return " + ".join(terms) or "0"


def _last_number(text: str) -> str:
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    return numbers[-1] if numbers else "?"


def _money(value: str) -> str:
    try:
        return f"{float(value):.2f}"
    except ValueError:
        return value


def _one_region(state: _State, path: str, region: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    reads = state.results("read_file")
    if not reads:
        return "", [("read_file", {"path": path})]
    rows = [r for r in _rows(reads[-1]) if r.get("region") == region]
    evaluations = state.results("evaluate")
    if not evaluations:
        return "", [("evaluate", {"expression": _revenue_expression(rows, region)})]
    total = _money(_last_number(evaluations[-1]))
    return f"Region {region}: revenue {total} from {len(rows)} rows.", []


def _region_report(state: _State, path: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    if "goal" in state.tools and not state.made("goal"):
        plan = f"Read {path}; Compute revenue per region; Report the top region"
        return "", [("goal", {"add": plan}), ("goal", {"focus": "2"})]
    reads = state.results("read_file")
    if not reads:
        return "", [("read_file", {"path": path})]
    rows = _rows(reads[-1])
    regions = list(dict.fromkeys(r["region"] for r in rows))
    totals = _region_totals(state, regions)
    if totals is None:
        steps: list[tuple[str, dict[str, Any]]] = []
        if "goal" in state.tools and not state.made("goal", done=f"Read {len(rows)} rows"):
            steps.append(("goal", {"done": f"Read {len(rows)} rows"}))
        if "agent" in state.tools:
            tasks = [f"Compute the revenue (units × unit_price) of region {r} in {path}." for r in regions]
            steps.append(("agent", {"task": tasks}))
        else:
            done = len(state.results("evaluate"))
            steps.append(("evaluate", {"expression": _revenue_expression(rows, regions[done])}))
        return "", steps
    if "evaluate" in state.tools and not state.made("evaluate", expression=f"max([{', '.join(totals.values())}])"):
        return "", [("evaluate", {"expression": f"max([{', '.join(totals.values())}])"})]
    best_value = _last_number(state.results("evaluate")[-1]) if "evaluate" in state.tools else max(totals.values(), key=float)
    best = next(r for r, v in totals.items() if float(v) == float(best_value))
    summary = f"Top region: {best} with revenue {_money(totals[best])}"
    if "goal" in state.tools and not state.made("goal", done=summary):
        return "", [("goal", {"done": f"Revenue computed for {len(totals)} regions"}), ("goal", {"done": summary})]
    lines = [f"- {r}: {_money(v)}" for r, v in totals.items()]
    return f"Revenue per region from {path} ({len(rows)} rows):\n" + "\n".join(lines) + f"\n{summary}.", []


def _region_totals(state: _State, regions: list[str]) -> dict[str, str] | None:
    if "agent" in state.tools:
        results = state.results("agent")
        if not results:
            return None
        totals = {}
        for region in regions:
            match = re.search(rf"Region {re.escape(region)}: revenue (-?\d+(?:\.\d+)?)", results[-1])
            if match is None:
                return None
            totals[region] = match.group(1)
        return totals
    evaluations = state.results("evaluate")
    if len(evaluations) < len(regions):
        return None
    return {r: _last_number(evaluations[i]) for i, r in enumerate(regions)}


def _arithmetic(state: _State, expression: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    results = state.results("evaluate")
    if not results:
        return "", [("evaluate", {"expression": expression})]
    return f"{expression} = {_last_number(results[-1])}", []
