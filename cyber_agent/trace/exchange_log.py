"""Model exchanges recorded with the trace that made them: the store's side of record-by-default.

Every store keeps, per trace, an append-only list of JSON objects, one per model call the trace's
run made (the record's shape is `cyber_agent/llm/cassette.py`'s: site, request key, the request as
a delta of the previous one, the response). The file store appends them to `exchanges.jsonl` in
the trace's folder; the SQL stores keep them in the `exchanges` table (schema version 3); the
memory store in a list. `ExchangeLog` is what the runner checks before it records: a store
without it (a read-only view of an export) records nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from cyber_agent.errors import CorruptRecordError

__all__ = ["EXCHANGES_FILE", "ExchangeLog", "decode_exchange"]

EXCHANGES_FILE = "exchanges.jsonl"
"""The file store's exchange log, one JSON line per exchange, in the trace's folder."""


@runtime_checkable
class ExchangeLog(Protocol):
    """A store that keeps the model exchanges of each trace."""

    async def append_exchange(self, trace_id: str, record: Mapping[str, Any]) -> int:
        """Append one exchange of `trace_id`; return its index (dense from 0 per trace)."""
        ...

    async def get_exchanges(self, trace_id: str) -> list[dict[str, Any]]:
        """The exchanges of `trace_id` in the order they were appended."""
        ...


def decode_exchange(line: str, trace_id: str, index: int) -> dict[str, Any]:
    """Parse one stored exchange; a record that is not a JSON object raises CorruptRecordError."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise CorruptRecordError(f"{trace_id}/exchanges", f"exchange {index} is not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise CorruptRecordError(f"{trace_id}/exchanges", f"exchange {index} is not a JSON object")
    return record
