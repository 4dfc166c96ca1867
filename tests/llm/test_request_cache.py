"""`cyber_agent/llm/request_cache.py:RequestCache` builds what building each request whole builds."""

from __future__ import annotations

import json
import random
from typing import Any

from cyber_agent.llm.cassette import request_key
from cyber_agent.llm.replay import canonical_request
from cyber_agent.llm.request_cache import RequestCache

ROOT = "2f8d3a1c-4b6e-4f9a-8c2d-1e5b7a9f3c4d"
CHILD = f"{ROOT}@delegate-20261203101500-001"
OTHER = "9a7b5c3d-1e2f-4a6b-8c0d-2e4f6a8b0c1d"
TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read.", "parameters": {"type": "object"}}}]
ID_TOOLS = [{"type": "function", "function": {"name": "report", "description": f"Report to {OTHER}.",
                                              "parameters": {"type": "object"}}}]


def whole(messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None) -> tuple[Any, str, str]:
    request = canonical_request(messages, model, tools)
    first = request["messages"][0] if request["messages"] else None
    name = "" if first is None else json.dumps(first, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return request, request_key(request), name


def check(cache: RequestCache, messages: list[dict[str, Any]], model: str = "m",
          tools: list[dict[str, Any]] | None = TOOLS) -> None:
    assert cache.request(messages, model, tools) == whole(messages, model, tools)


def test_an_extended_history_gets_the_key_of_the_whole_request() -> None:
    cache = RequestCache()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are the main agent."},
                                     {"role": "user", "content": f"task of {ROOT}"}]
    check(cache, history)
    for i in range(30):
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "read", "arguments": f'{{"n": {i}}}'}}]})
        history.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"child {CHILD} said {i} to {OTHER}"})
        check(cache, history)
    check(cache, history, tools=None)
    check(cache, history, model="other")
    check(cache, history, tools=ID_TOOLS)  # ids in the tools are numbered after every message's
    history.append({"role": "user", "content": f"and {'9' * 8}-1e2f-4a6b-8c0d-2e4f6a8b0c1d"})
    check(cache, history, tools=ID_TOOLS)


def test_a_replaced_message_or_a_rewritten_tail_is_rebuilt() -> None:
    cache = RequestCache()
    history: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": ROOT},
                                     {"role": "assistant", "content": OTHER}, {"role": "user", "content": "go"}]
    check(cache, history)
    history[2] = {**history[2], "content": f"cleared {CHILD}"}  # what micro_compact does: a new dict
    check(cache, history)
    history[1:] = [{"role": "user", "content": f"compacted {OTHER}"}, {"role": "user", "content": ROOT}]
    check(cache, history)
    del history[2]
    check(cache, history)
    check(cache, [])
    check(cache, list(history))  # a new list of the same objects


def test_helper_conversations_interleave_with_the_main_one() -> None:
    cache = RequestCache()
    main: list[dict[str, Any]] = [{"role": "system", "content": "main"}]
    helper = [{"role": "system", "content": "Summarize."}, {"role": "user", "content": f"text of {ROOT}"}]
    rng = random.Random(7)
    for i in range(60):
        if rng.random() < 0.3:
            check(cache, helper, tools=None)
        else:
            main.append({"role": rng.choice(["user", "assistant"]), "content": rng.choice([ROOT, OTHER, CHILD, f"n{i}"])})
            if rng.random() < 0.1:
                del main[1:rng.randint(1, len(main))]  # a compaction drops a span
            check(cache, main, tools=rng.choice([TOOLS, ID_TOOLS, None, []]))
