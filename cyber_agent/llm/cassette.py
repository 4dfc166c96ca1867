"""Exchanges recorded with the trace, keyed by request hash; replayed (or forked) without a recording file.

The runner wraps every run's model in `ExchangeRecorder` (unless `RunConfig.record_exchanges` is
off): each completed call becomes one record in the store, beside the trace that made it
(`cyber_agent/trace/exchange_log.py`)::

    {"v": 1, "site": "root/delegate-001", "key": "<sha256>", "model": "...", "temperature": null,
     "base": 3, "keep": 7, "messages": [<the messages after the first 7 of exchange 3's>], "tools": null,
     "response": {...}}

`key` is the SHA-256 of the canonical request (`replay.canonical_request`: messages, model,
tools) with its ids normalised (`call_site.normalise_ids`), so the same request in another run of
the tree has the same key. A request usually extends the trace's previous one, so only what
follows the messages they share is stored (`base` names that exchange, `keep` how many of its
messages lead this request; `tools: null` means the previous tools): a trace's recording grows
with its conversation, not with its square, even when a compaction rewrites the history's tail.
`expand_records` rebuilds the full requests.

`CassetteLLM` answers from recorded exchanges by (tree position, key): a request is served only
by a recorded request equal to it, in FIFO order per key, so concurrent children replay
deterministically; a request that matches nothing is never answered from another one: it goes
to the live model, or raises `ReplayDivergenceError` naming the first difference when there is
none (an exact replay).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cyber_agent.errors import CorruptRecordError, ReplayDivergenceError
from cyber_agent.llm.boundary import normalise_reply
from cyber_agent.llm.call_site import current_position, current_site, id_mapping, normalise_ids, rename_ids, tree_position
from cyber_agent.llm.replay import _first_difference, canonical_request
from cyber_agent.llm.request_cache import RequestCache, _key_text
from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse

__all__ = ["CassetteLLM", "ExchangeRecorder", "RECORD_VERSION", "RecordedExchange", "expand_records", "request_key"]

RECORD_VERSION = 1

ExchangeSink = Callable[[str, dict[str, Any]], Awaitable[int]]
"""Where records go: `(trace_id, record) -> index` (a store's `append_exchange`)."""


def request_key(request: Mapping[str, Any]) -> str:
    """SHA-256 of a canonical request with its ids normalised: equal in every run of the same tree."""
    text = json.dumps(normalise_ids(dict(request)), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class ExchangeRecorder:
    """Wrap the model of one trace's run and append each completed exchange to `sink`."""

    def __init__(self, inner: LLMCall, sink: ExchangeSink, trace_id: str) -> None:
        self.inner = inner
        self.sink = sink
        self.trace_id = trace_id
        self.site = tree_position(trace_id)
        # The last record of each conversation (by its first message: a helper call such as a
        # summary is another conversation) and where each tool list was first stored.
        self._last: dict[str, tuple[int, dict[str, Any]]] = {}
        self._tools_at: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._requests = RequestCache()  # each message canonicalised and hashed once, not once per call

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Call the wrapped model, then record the exchange (a failed call records nothing)."""
        request, key, conversation = self._requests.request(messages, model, tools)
        response = await self.inner(messages, model, tools, temperature, on_delta=on_delta)
        # A custom `LLMCall` may return a mapping, even with unbookable usage: the record holds the
        # reply as the boundary reads it; the runner still gets (and normalises) the raw reply.
        recorded = response if isinstance(response, LLMResponse) else normalise_reply(response, messages, model)
        async with self._lock:
            record, tools_text = self._record(request, key, conversation, temperature, recorded)
            try:
                index = await self.sink(self.trace_id, record)
            except Exception as exc:  # noqa: BLE001 - a recording never fails the run it records
                warnings.warn(f"exchange of {self.trace_id} not recorded: {type(exc).__name__}: {exc}",
                              RuntimeWarning, stacklevel=2)
                self._last.clear()  # indexes are unknown now: the next record stands alone
                self._tools_at.clear()
            else:
                self._last[conversation] = (index, request)
                if tools_text is not None:
                    self._tools_at.setdefault(tools_text, index)
        return response

    def _record(self, request: dict[str, Any], key: str, conversation: str, temperature: float | None,
                response: LLMResponse) -> tuple[dict[str, Any], str | None]:
        """The record of one exchange, and the dump of its tools when it stores them whole (None otherwise)."""
        record: dict[str, Any] = {"v": RECORD_VERSION, "site": self.site, "key": key,
                                  "model": request["model"], "temperature": temperature, "base": None,
                                  "messages": request["messages"], "tools": request["tools"]}
        last = self._last.get(conversation)
        if last is not None:
            base, previous = last
            old, new = previous["messages"], request["messages"]
            # Usually the request extends the last one and shares its message objects (RequestCache): one C compare.
            keep = len(old) if len(new) >= len(old) and new[:len(old)] == old else 0
            while keep < min(len(old), len(new)) and old[keep] == new[keep]:
                keep += 1
            if keep:  # the messages shared with the conversation's last request are named, not stored again
                record.update(base=base, keep=keep, messages=new[keep:])
                if previous["tools"] == request["tools"]:
                    record["tools"] = None
        tools_text = None
        if isinstance(record["tools"], list):  # dumped once: the lookup here and the note after the write
            tools_text = _dump(request["tools"])
            stored = self._tools_at.get(tools_text) if record["tools"] else None
            if stored is not None:
                record["tools"] = {"ref": stored}
                tools_text = None
        record["response"] = response.model_dump(mode="json")
        return record, tools_text


def _dump(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))` (the request key's dump)."""
    return _key_text(value)


@dataclass(frozen=True, kw_only=True)
class RecordedExchange:
    """One stored exchange with its request rebuilt whole."""

    trace_id: str
    """The trace that made the call (in the recorded run's ids)."""
    index: int
    """Its index among that trace's exchanges."""
    site: str
    """Tree position of the trace (`root/delegate-001`)."""
    key: str
    """`request_key` of the request."""
    request: dict[str, Any]
    """The canonical request (messages, model, tools) as the recorded run sent it."""
    temperature: float | None
    response: LLMResponse

    @property
    def ref(self) -> tuple[str, int]:
        """(trace id, index): names the exchange in its recording."""
        return (self.trace_id, self.index)


def expand_records(trace_id: str, records: Sequence[Mapping[str, Any]]) -> list[RecordedExchange]:
    """Rebuild the full requests of one trace's stored records (deltas resolved against their base)."""
    out: list[RecordedExchange] = []
    for index, record in enumerate(records):
        try:
            base = record["base"]
            tools = record["tools"]
            if base is None:
                messages = list(record["messages"])
            else:
                previous = out[int(base)].request
                keep = int(record.get("keep", len(previous["messages"])))
                messages = previous["messages"][:keep] + list(record["messages"])
                tools = previous["tools"] if tools is None else tools
            if isinstance(tools, dict):  # {"ref": i}: the tools stored with exchange i of this trace
                tools = out[int(tools["ref"])].request["tools"]
            request = {"messages": messages, "model": record["model"], "tools": tools or []}
            out.append(RecordedExchange(
                trace_id=trace_id, index=index, site=str(record["site"]), key=str(record["key"]), request=request,
                temperature=record.get("temperature"), response=LLMResponse.model_validate(record["response"]),
            ))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise CorruptRecordError(f"{trace_id}/exchanges", f"exchange {index}: {type(exc).__name__}: {exc}") from None
    return out


@dataclass
class CallLog:
    """How a cassette answered, per tree position."""

    replayed: dict[str, int] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)

    def add(self, site: str, live: bool) -> None:
        side = self.live if live else self.replayed
        side[site] = side.get(site, 0) + 1


class CassetteLLM:
    """Answer requests equal to recorded ones from the recording; send the rest to `live` (or raise).

    `overrides` replaces the recorded response of an exchange (by `RecordedExchange.ref`): a fork
    that changes what a model said. `models` sends the calls of a tree position under another
    model name (so they miss and go live), to `site_live[position]` when given. `live_model` is
    the model name other live calls are sent with (default: the request's).
    """

    def __init__(
        self,
        exchanges: Iterable[RecordedExchange],
        live: LLMCall | None = None,
        *,
        live_model: str | None = None,
        overrides: Mapping[tuple[str, int], LLMResponse] | None = None,
        models: Mapping[str, str] | None = None,
        site_live: Mapping[str, LLMCall] | None = None,
        source: str = "the recording",
    ) -> None:
        self.exchanges = list(exchanges)
        self.live = live
        self.live_model = live_model
        self.overrides = dict(overrides or {})
        self.models = dict(models or {})
        self.site_live = dict(site_live or {})
        self.source = source
        self.log = CallLog()
        self._lanes: dict[tuple[str, str], deque[RecordedExchange]] = {}
        self._next: dict[tuple[str, int], RecordedExchange] = {}
        for exchange in self.exchanges:
            self._lanes.setdefault((exchange.site, exchange.key), deque()).append(exchange)
            self._next[(exchange.trace_id, exchange.index - 1)] = exchange
        self._results: dict[tuple[str, str], str] = {}

    @property
    def replayed(self) -> int:
        """Calls answered from the recording."""
        return sum(self.log.replayed.values())

    @property
    def live_calls(self) -> int:
        """Calls sent to the live model."""
        return sum(self.log.live.values())

    def recorded_result(self, trace_id: str, call_id: str) -> str | None:
        """The recorded result of a tool call of a replayed turn (None when the recording has none)."""
        return self._results.get((trace_id, call_id))

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Answer from the recording when an equal request was recorded at this position, else live."""
        site = current_position() or "root"
        model = self.models.get(site, model)
        got = canonical_request(messages, model, tools)
        lane = self._lanes.get((site, request_key(got)))
        if lane:
            exchange = lane.popleft()
            self.log.add(site, live=False)
            response = self.overrides.get(exchange.ref, exchange.response)
            mapping = id_mapping(exchange.request, got)
            if mapping:
                response = LLMResponse.model_validate(rename_ids(response.model_dump(mode="json"), mapping))
            else:
                response = response.model_copy(deep=True)
            self._note_results(exchange, mapping)
            if on_delta is not None and response.content:
                on_delta(response.content)
            return response
        live = self.site_live.get(site, self.live)
        if live is None:
            raise ReplayDivergenceError(self._miss(site, got))
        self.log.add(site, live=True)
        sent = model if site in self.models else (self.live_model or model)
        return await live(messages, sent, tools, temperature, on_delta=on_delta)

    def _note_results(self, exchange: RecordedExchange, mapping: dict[str, str]) -> None:
        """Keep the recorded results of the replayed turn's tool calls (read from the trace's next request)."""
        following = self._next.get(exchange.ref)
        calls = {call.id for call in exchange.response.tool_calls}
        site = current_site()
        if following is None or not calls or site is None:
            return
        for message in following.request["messages"]:
            if isinstance(message, dict) and message.get("role") == "tool" and message.get("tool_call_id") in calls:
                content = message.get("content")
                if isinstance(content, str):
                    call_id = str(rename_ids(message["tool_call_id"], mapping))
                    self._results[(site, call_id)] = str(rename_ids(content, mapping))

    def _miss(self, site: str, got: dict[str, Any]) -> str:
        waiting = [e for lane in self._lanes.values() for e in lane if e.site == site]
        if not waiting:
            return (f"no recorded exchange at {site} is left in {self.source} for this request; "
                    "the replayed run went further than the recorded one")
        nearest = min(waiting, key=lambda e: (e.trace_id, e.index))
        difference = _first_difference(normalise_ids(nearest.request), normalise_ids(got)) or "same request, other key"
        return (f"request at {site} matches no exchange of {self.source}; nearest is exchange {nearest.index} of "
                f"{nearest.trace_id}: {difference}")
