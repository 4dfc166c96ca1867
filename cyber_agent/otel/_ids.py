"""Deterministic OpenTelemetry ids: the trace id from the root id, span ids from record ids.

Exporting a tree twice, or live and then after the fact, gives the same ids, so a backend sees
one trace. A root id that is a UUID (every root the runner creates, SPEC T2) is that UUID as
128 bits, so the OTel trace id reads as the root id without its dashes.
"""

from __future__ import annotations

import hashlib
import uuid

__all__ = ["agent_span_id", "chat_span_id", "otel_trace_id", "span_id", "tool_span_id"]


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def otel_trace_id(root_id: str) -> int:
    """Return the 128-bit OTel trace id of the tree whose root is `root_id`."""
    try:
        value = uuid.UUID(root_id).int
    except ValueError:
        value = int.from_bytes(_digest(f"root:{root_id}")[:16], "big")
    return value or 1  # an all-zero id is invalid in OTel


def span_id(key: str) -> int:
    """Return the 64-bit span id of a record key (64 bits of its SHA-256; never zero)."""
    return int.from_bytes(_digest(key)[:8], "big") or 1


def agent_span_id(trace_id: str) -> int:
    """The span id of a trace's `invoke_agent` span."""
    return span_id(f"agent:{trace_id}")


def chat_span_id(message_id: str) -> int:
    """The span id of the `chat` span of an assistant message."""
    return span_id(f"chat:{message_id}")


def tool_span_id(assistant_message_id: str, call_id: str) -> int:
    """The span id of the `execute_tool` span of one call of an assistant message.

    Keyed by the assistant message, which exists before the tool runs, so a child started by the
    call can name its parent span before the call's result is stored.
    """
    return span_id(f"tool:{assistant_message_id}/{call_id}")
