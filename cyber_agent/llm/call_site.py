"""Where in a run tree a model call is made, so a recording can be keyed by position, not by fresh ids.

The runner wraps the model of each run with `at_site(llm, trace_id)`; while a call is under way
`current_site()` returns that trace id and `current_position()` its *tree position*: the trace
id with its run-specific parts removed. A root is `root`; a T2 sub-trace `{parent}@{mode}-{YYYYmmddHHMMSS}-{seq}` is its
parent's position plus `/{mode}-{seq}`, so `<uuid>@delegate-20261203101500-001@validator-...-000`
is `root/delegate-001/validator-000` in every run of the same tree.

`normalise_ids` does the same inside a request: root UUIDs become `<id1>`, `<id2>`... in order of
first appearance and the timestamps of T2 suffixes become `<t>`, so two runs of one tree send
equal canonical requests (`cyber_agent/llm/replay.py`). The T2 pattern is repeated here from
`cyber_agent/trace/trace_id.py` because `llm/` imports nothing above itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse

__all__ = ["at_site", "current_position", "current_site", "id_mapping", "normalise_ids", "rename_ids", "tree_position"]

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SUFFIX = re.compile(r"@([a-z][a-z0-9_]{0,31})-(\d{14})-(\d{3,6})")
_FULL = re.compile(_UUID.pattern + r"(?:" + _SUFFIX.pattern.replace("(", "(?:") + r")*")

# The trace whose run is making the current model call; a ContextVar, so concurrent children
# (each in its own task) never see each other's site.
_SITE: ContextVar[str | None] = ContextVar("cyber_agent_call_site", default=None)


def tree_position(trace_id: str) -> str:
    """Return the position of `trace_id` in its tree: `root`, `root/delegate-001`, ..."""
    parts = ["root"]
    parts += [f"{match.group(1)}-{match.group(3)}" for match in _SUFFIX.finditer(trace_id)]
    return "/".join(parts)


def current_site() -> str | None:
    """The trace id of the run making the current model call (None outside a runner)."""
    return _SITE.get()


def current_position() -> str | None:
    """The tree position of the current model call (None outside a runner)."""
    trace_id = _SITE.get()
    return None if trace_id is None else tree_position(trace_id)


@contextmanager
def _site(trace_id: str) -> Iterator[None]:
    token = _SITE.set(trace_id)
    try:
        yield
    finally:
        _SITE.reset(token)


class _Sited:
    """An LLMCall that marks each call it forwards with the trace it is made for."""

    def __init__(self, inner: LLMCall, trace_id: str) -> None:
        self.inner = inner
        self.trace_id = trace_id

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        token = _SITE.set(self.trace_id)  # what `_site` does, without a generator per call
        try:
            return await self.inner(messages, model, tools, temperature, on_delta=on_delta)
        finally:
            _SITE.reset(token)


def at_site(llm: LLMCall, trace_id: str) -> LLMCall:
    """Wrap `llm` so every call through it runs with `current_site() == trace_id`."""
    if isinstance(llm, _Sited):
        llm = llm.inner
    return _Sited(llm, trace_id)


def normalise_ids(value: Any, numbers: dict[str, str] | None = None) -> Any:
    """Return `value` (JSON data) with root UUIDs numbered by first appearance and T2 timestamps blanked.

    `numbers` (UUID -> `<idN>`) carries the numbering on from values normalised before, in place:
    normalising a list's items one by one with one dict equals normalising the list.
    """
    numbers = {} if numbers is None else numbers

    def uuid(match: re.Match[str]) -> str:
        return numbers.setdefault(match.group(0), f"<id{len(numbers) + 1}>")

    def text(item: str) -> str:
        return _UUID.sub(uuid, _SUFFIX.sub(lambda m: f"@{m.group(1)}-<t>-{m.group(3)}", item))

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return text(item)
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, dict):
            return {text(k): walk(v) for k, v in item.items()}
        return item

    return walk(value)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


def _tokens(value: Any) -> list[str]:
    seen: dict[str, None] = {}
    for text in _strings(value):
        for match in _FULL.finditer(text):
            seen.setdefault(match.group(0), None)
    return list(seen)


def _prefixes(token: str) -> list[str]:
    cuts = [m.start() for m in _SUFFIX.finditer(token)] + [len(token)]
    return [token[:cut] for cut in cuts]


def id_mapping(recorded: Any, got: Any) -> dict[str, str]:
    """Map each trace id (and each of its ancestors) of a recorded request onto the one in its place in `got`.

    The two requests must be equal under `normalise_ids`, so their ids appear in the same places.
    """
    mapping: dict[str, str] = {}
    for old, new in zip(_tokens(recorded), _tokens(got)):
        for old_prefix, new_prefix in zip(_prefixes(old), _prefixes(new)):
            if old_prefix != new_prefix:
                mapping.setdefault(old_prefix, new_prefix)
    return mapping


def rename_ids(value: Any, mapping: dict[str, str]) -> Any:
    """Return `value` (JSON data) with every id of `mapping`, and every id descending from one, renamed."""
    if not mapping:
        return value

    def token(match: re.Match[str]) -> str:
        found = match.group(0)
        for prefix in reversed(_prefixes(found)):  # the longest known ancestor wins
            if prefix in mapping:
                return mapping[prefix] + found[len(prefix):]
        return found

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return _FULL.sub(token, item)
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        return item

    return walk(value)
