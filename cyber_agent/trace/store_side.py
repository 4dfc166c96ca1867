"""The side records of a trace store: resource usage, stop requests, tool approvals, exchanges.

`cyber_agent/trace/store_base.py:BaseTraceStore` inherits these from
`cyber_agent/trace/store_side.py:SideRecordStore`; a concrete store supplies the four record
primitives, the base class the locking (`_writing_side`) and existence checks. Each record is one
JSON document per trace (or, for exchanges, one line each), replaced whole under the trace's
writer lock, so a crash leaves the old record or the new one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from pydantic import BaseModel, ValidationError

from cyber_agent.errors import InvalidUpdateError
from cyber_agent.trace.budget_limits import ResourceUsage
from cyber_agent.trace.events import encode_json
from cyber_agent.trace.exchange_log import decode_exchange
from cyber_agent.trace.models import utc_now
from cyber_agent.trace.protocols import UsageChange
from cyber_agent.trace.side_records import StopRequest, ToolApprovals, stop_request_from, tool_approvals_from, usage_from
from cyber_agent.trace.trace_id import validate_trace_id

__all__ = ["SideRecordStore"]


class SideRecordStore(ABC):
    """Usage, stop requests, approvals and exchanges over four per-store record primitives."""

    @abstractmethod
    def _read_side_record(self, trace_id: str, name: str) -> dict[str, Any] | None: ...
    @abstractmethod
    def _write_side_record(self, trace_id: str, name: str, data: str) -> None: ...
    @abstractmethod
    def _append_exchange_line(self, trace_id: str, line: str) -> int: ...
    @abstractmethod
    def _read_exchange_lines(self, trace_id: str) -> list[str]: ...

    @abstractmethod
    def _writing_side(self, trace_id: str) -> AbstractContextManager[None]: ...

    @abstractmethod
    def _exists(self, trace_id: str) -> bool: ...

    @abstractmethod
    def _require_exists(self, trace_id: str) -> None: ...

    # ---- side records -------------------------------------------------------------------
    async def get_resource_usage(self, root_trace_id: str) -> ResourceUsage | None:
        """Return the root's usage; None if never written or no such trace; CorruptRecordError if unreadable or incomplete."""
        return usage_from(self._get_side(root_trace_id, "resource_usage"), _where(root_trace_id, "resource_usage"))

    async def replace_resource_usage(self, root_trace_id: str, usage: ResourceUsage | Mapping[str, Any]) -> None:
        """Atomically replace the root's usage record (a mapping is written as given)."""
        self._replace_side(root_trace_id, "resource_usage", _side_json(usage, "resource_usage"))

    async def update_resource_usage(self, root_trace_id: str, change: UsageChange) -> ResourceUsage | None:
        """Read, change and write the root's usage as one atomic step across processes.

        `change(current)` gets the persisted usage (None if never written) under the trace's
        writer lock (a file lock, or one `BEGIN IMMEDIATE` transaction) and returns the usage to
        write, or None to write nothing. It must not await and may raise (nothing is written).
        Returns what is persisted afterwards. A persisted record that is incomplete or invalid
        raises CorruptRecordError before `change` runs (the budget fails closed).
        """
        validate_trace_id(root_trace_id)
        where = _where(root_trace_id, "resource_usage")
        with self._writing_side(root_trace_id):
            self._require_exists(root_trace_id)
            current = usage_from(self._read_side_record(root_trace_id, "resource_usage"), where)
            new = change(current)
            if new is None:
                return current
            if isinstance(new, Mapping):
                try:
                    new = ResourceUsage.model_validate(new)
                except ValidationError as exc:
                    raise InvalidUpdateError(f"resource_usage of {root_trace_id!r}: {exc.errors()[0]['msg']} "
                                             f"({'.'.join(map(str, exc.errors()[0]['loc']))})") from None
            if not isinstance(new, ResourceUsage):
                raise InvalidUpdateError(f"resource_usage must be a ResourceUsage or a mapping, got {type(new).__name__}")
            self._write_side_record(root_trace_id, "resource_usage", encode_json(new, "resource_usage"))
            return new.model_copy()

    # ---- persistent stop requests (seen by every process running part of the tree) -------------
    async def request_stop(self, trace_id: str, reason: str, *, subtree: bool = True) -> None:
        """Persist a stop request for the trace (and, with `subtree`, every descendant)."""
        validate_trace_id(trace_id)
        if not isinstance(reason, str) or not reason:
            raise InvalidUpdateError(f"a stop reason must be a non-empty string, got {reason!r}")
        self._replace_side(trace_id, "stop_request", {"reason": reason, "subtree": bool(subtree),
                                                      "requested_at": utc_now().isoformat()})

    async def clear_stop(self, trace_id: str) -> None:
        """Withdraw the trace's own stop request (a continued trace runs again)."""
        validate_trace_id(trace_id)
        with self._writing_side(trace_id):
            self._require_exists(trace_id)
            if self._read_side_record(trace_id, "stop_request") is not None:
                self._write_side_record(trace_id, "stop_request", "{}")

    async def get_stop_requests(self, trace_ids: Sequence[str]) -> dict[str, StopRequest]:
        """The persisted stop requests among `trace_ids` (unknown ids and traces without one are left out)."""
        out: dict[str, StopRequest] = {}
        for trace_id in trace_ids:
            validate_trace_id(trace_id)
            record = self._read_side_record(trace_id, "stop_request") if self._exists(trace_id) else None
            if not record:  # none, or withdrawn ({}): what every halt check of a run not stopped reads
                continue
            request = stop_request_from(record, _where(trace_id, "stop_request"))
            if request is not None:
                out[trace_id] = request
        return out

    async def get_tool_approvals(self, trace_id: str) -> ToolApprovals | None:
        """Return the persisted approval state of the trace, or None; CorruptRecordError if a batch does not fit."""
        return tool_approvals_from(self._get_side(trace_id, "tool_approvals"), _where(trace_id, "tool_approvals"))

    async def replace_tool_approvals(self, trace_id: str, state: ToolApprovals | Mapping[str, Any]) -> None:
        """Atomically replace the trace's approval state (a mapping is written as given)."""
        self._replace_side(trace_id, "tool_approvals", _side_json(state, "tool_approvals"))

    def _get_side(self, trace_id: str, name: str) -> dict[str, Any] | None:
        validate_trace_id(trace_id)
        return self._read_side_record(trace_id, name) if self._exists(trace_id) else None

    def _replace_side(self, trace_id: str, name: str, data: Mapping[str, Any]) -> None:
        validate_trace_id(trace_id)
        if not isinstance(data, Mapping):
            raise InvalidUpdateError(f"{name} must be a mapping, got {type(data).__name__}")
        text = encode_json(dict(data), name)
        with self._writing_side(trace_id):
            self._require_exists(trace_id)
            self._write_side_record(trace_id, name, text)

    # ---- recorded model exchanges (cyber_agent/trace/exchange_log.py) --------------------------
    async def append_exchange(self, trace_id: str, record: Mapping[str, Any]) -> int:
        """Append one model exchange of the trace's run; return its index (dense from 0 per trace)."""
        validate_trace_id(trace_id)
        text = encode_json(dict(record), "exchange")
        with self._writing_side(trace_id):
            self._require_exists(trace_id)
            return self._append_exchange_line(trace_id, text)

    async def get_exchanges(self, trace_id: str) -> list[dict[str, Any]]:
        """The trace's recorded exchanges in the order they were appended ([] for none)."""
        validate_trace_id(trace_id)
        self._require_exists(trace_id)
        return [decode_exchange(line, trace_id, number) for number, line in enumerate(self._read_exchange_lines(trace_id))]


def _where(trace_id: str, name: str) -> str:
    """Where a side record lives, as a CorruptRecordError names it."""
    return f"{trace_id}/{name}.json"


def _side_json(value: Any, name: str) -> Any:
    # A typed record is written in JSON mode; a mapping as given; anything else is refused by _replace_side.
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value
