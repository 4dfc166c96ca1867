"""Traces: the persisted record of every run (models, ids, goal trees, events, stores)."""

from cyber_agent.trace.events import EVENT_TYPES, EventType, TraceEvent
from cyber_agent.trace.goal_models import Goal, GoalStats, GoalStatus, GoalTree
from cyber_agent.trace.memory_store import InMemoryTraceStore
from cyber_agent.trace.models import Message, MessageContent, Trace, TraceStatus
from cyber_agent.trace.protocols import TraceReader, TraceStore
from cyber_agent.trace.records import TraceRecord
from cyber_agent.trace.sqlite_store import SQLiteTraceStore
from cyber_agent.trace.store import FileSystemTraceStore
from cyber_agent.trace.store_url import open_store
from cyber_agent.trace.trace_id import new_root_trace_id, new_sub_trace_id, parse_trace_id, validate_trace_id

__all__ = [
    "EVENT_TYPES",
    "EventType",
    "FileSystemTraceStore",
    "Goal",
    "GoalStats",
    "GoalStatus",
    "GoalTree",
    "InMemoryTraceStore",
    "Message",
    "MessageContent",
    "SQLiteTraceStore",
    "Trace",
    "TraceEvent",
    "TraceReader",
    "TraceRecord",
    "TraceStatus",
    "TraceStore",
    "new_root_trace_id",
    "new_sub_trace_id",
    "open_store",
    "parse_trace_id",
    "validate_trace_id",
]
