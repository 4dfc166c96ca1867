"""Record model exchanges as JSON lines and replay them offline, failing loudly on divergence.

One line per exchange, in completion order:
`{"version": 2, "site": "root/delegate-001", "request": {"messages", "model", "tools", "temperature"},
"response": {...}}`. The line number (0-based) is the exchange index that divergence errors name.

A multi-agent run is keyed by *position in the tree* (`site`, from `cyber_agent/llm/call_site.py`:
the runner marks each call with its trace) and by call index within that position, never by
the fresh trace ids of a run: the replay of one position plays that position's exchanges in
order, whatever order concurrent children finish in. Requests are compared with their ids
normalised (`normalise_ids`), because a replayed tree's ids are new. Version-1 lines (no site)
replay in the global order they were recorded in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cyber_agent.errors import ConfigurationError, CorruptRecordError, ReplayDivergenceError
from cyber_agent.llm.call_site import current_position, id_mapping, normalise_ids, rename_ids
from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse

__all__ = ["Exchange", "FORMAT_VERSION", "RecordingLLM", "ReplayLLM", "canonical_request", "load_exchanges"]

FORMAT_VERSION = 2


def _default(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


def canonical_request(messages: list[dict[str, Any]], model: str, tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Return the JSON-normalized part of a request that replay compares (temperature excluded)."""
    request: dict[str, Any] = json.loads(json.dumps({"messages": messages, "model": model, "tools": tools or []},
                                                    default=_default, ensure_ascii=False))
    return request


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default)


def _excerpt(value: object, limit: int = 120) -> str:
    text = _dump(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_difference(recorded: Mapping[str, Any], got: Mapping[str, Any]) -> str | None:
    if recorded["model"] != got["model"]:
        return f"model: recorded {recorded['model']!r}, got {got['model']!r}"
    old, new = recorded["messages"], got["messages"]
    for i, (a, b) in enumerate(zip(old, new)):
        if _dump(a) == _dump(b):
            continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for key in sorted(set(a) | set(b)):
                if _dump(a.get(key)) != _dump(b.get(key)):
                    return f"message {i} field {key!r}: recorded {_excerpt(a.get(key))}, got {_excerpt(b.get(key))}"
        return f"message {i}: recorded {_excerpt(a)}, got {_excerpt(b)}"
    if len(old) != len(new):
        extra = new[len(old)] if len(new) > len(old) else old[len(new)]
        side = "got" if len(new) > len(old) else "recorded"
        return f"recorded {len(old)} messages, got {len(new)}; first unmatched ({side}): {_excerpt(extra)}"
    if _dump(recorded["tools"]) != _dump(got["tools"]):
        names = [[(t.get("function") or t).get("name") for t in side] for side in (recorded["tools"], got["tools"])]
        return f"tools: recorded {names[0]}, got {names[1]}" if names[0] != names[1] else "tools: same names, different schemas"
    return None


@dataclass(frozen=True, kw_only=True)
class Exchange:
    """One recorded call: the canonical request and the response it got."""

    index: int
    """Line of the exchange in its file (0-based, blank lines skipped)."""
    request: dict[str, Any]
    """The canonical request as sent (ids as they were in the recorded run)."""
    temperature: float | None
    """Temperature of the call (not compared on replay)."""
    response: LLMResponse
    """What the model answered."""
    site: str | None = None
    """Tree position of the call (`root`, `root/delegate-001`); None for calls outside a runner and version-1 lines."""


def load_exchanges(path: str | Path) -> list[Exchange]:
    """Read a recording; a truncated final line (a crash mid-write) is ignored."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError("replay path", f"{path} does not exist; record a run with RecordingLLM first") from None
    lines = text.split("\n")
    exchanges: list[Exchange] = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            request = record["request"]
            exchange = Exchange(
                index=len(exchanges),
                request={"messages": request["messages"], "model": request["model"], "tools": request.get("tools") or []},
                temperature=request.get("temperature"),
                response=LLMResponse.model_validate(record["response"]),
                site=record.get("site"),
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as exc:
            if number == len(lines) - 1:  # no newline after it: the writer died mid-line
                break
            raise CorruptRecordError(path, f"line {number + 1}: {type(exc).__name__}: {exc}") from exc
        exchanges.append(exchange)
    return exchanges


class RecordingLLM:
    """Wrap any LLMCall and append each completed exchange to a JSON-lines file."""

    def __init__(self, inner: LLMCall, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.recorded = 0
        """Exchanges this recorder has written."""
        self._lock = asyncio.Lock()

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Open-append-close per line: each exchange is on disk once the call returns, so a crash
        # loses at most the exchange being written.
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Call the wrapped model and record the exchange; failed calls are not recorded."""
        request = canonical_request(messages, model, tools)  # before the call, as it was sent
        site = current_position()
        response = await self.inner(messages, model, tools, temperature, on_delta=on_delta)
        record = {"version": FORMAT_VERSION, "site": site, "request": {**request, "temperature": temperature},
                  "response": response.model_dump(mode="json")}
        line = json.dumps(record, ensure_ascii=False, default=_default) + "\n"
        async with self._lock:  # concurrent calls must not interleave bytes within a line
            await asyncio.to_thread(self._append, line)
            self.recorded += 1
        return response


class ReplayLLM:
    """Play a recording back offline; a request that differs from the recorded one raises.

    Each tree position plays its own exchanges in recorded order; with `strict_order=False` a
    call takes the first unused exchange of its position with an identical request, which
    tolerates concurrent calls of one trace (parallel tool summaries) finishing in another order.
    """

    def __init__(self, path: str | Path, *, strict_order: bool = True) -> None:
        self.path = Path(path)
        self.exchanges = load_exchanges(self.path)
        self.strict_order = strict_order
        self._used = [False] * len(self.exchanges)
        self._comparable = [normalise_ids(e.request) for e in self.exchanges]
        # A recording without sites (version 1, or made outside a runner) replays in global order.
        self._by_site = any(e.site is not None for e in self.exchanges)
        self._site_calls: dict[str | None, int] = {}
        self.calls = 0
        """Calls received so far."""

    @property
    def model(self) -> str:
        """Return the model name of the first recorded request ("" for an empty recording)."""
        return self.exchanges[0].request["model"] if self.exchanges else ""

    @property
    def remaining(self) -> int:
        """Return how many recorded exchanges have not been played."""
        return self._used.count(False)

    def _pick(self, got: dict[str, Any], site: str | None) -> int:
        key = site if self._by_site else None
        call = self._site_calls.get(key, 0)
        where = f"call {call} at {key}" if self._by_site else f"call {call}"
        unused = [i for i, used in enumerate(self._used) if not used and (not self._by_site or self.exchanges[i].site == key)]
        if not unused:
            held = sum(1 for e in self.exchanges if not self._by_site or e.site == key)
            of = " of that position" if self._by_site else ""
            raise ReplayDivergenceError(
                f"{where} asks for exchange {call}{of} but {self.path} holds only {held}{' for it' if of else ''}; "
                "the run went further than the recording (re-record it, or find why it did not stop)"
            )
        comparable = normalise_ids(got)
        if not self.strict_order:
            for i in unused:
                if _first_difference(self._comparable[i], comparable) is None:
                    return i
        index = unused[0]
        difference = _first_difference(self._comparable[index], comparable)
        if difference is not None:
            raise ReplayDivergenceError(
                f"exchange {index} of {self.path} ({where}) diverges: {difference}; re-record the run if the change is intended"
            )
        return index

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Return the recorded response for this request."""
        got = canonical_request(messages, model, tools)
        site = current_position()
        key = site if self._by_site else None
        try:
            index = self._pick(got, site)
        finally:
            self.calls += 1
            self._site_calls[key] = self._site_calls.get(key, 0) + 1
        self._used[index] = True
        exchange = self.exchanges[index]
        # The recorded answer names the recorded run's trace ids; this run's are new.
        mapping = id_mapping(exchange.request, got)
        if mapping:
            response = LLMResponse.model_validate(rename_ids(exchange.response.model_dump(mode="json"), mapping))
        else:
            response = exchange.response.model_copy(deep=True)
        if on_delta is not None and response.content:
            on_delta(response.content)
        return response

    def assert_all_used(self) -> None:
        """Raise AssertionError when recorded exchanges were never asked for."""
        if self.remaining:
            left = [i for i, used in enumerate(self._used) if not used]
            raise AssertionError(f"{self.remaining} exchange(s) of {self.path} never replayed: indexes {left}")
