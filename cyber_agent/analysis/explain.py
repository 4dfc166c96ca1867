"""Failure attribution: the first node and step where a stored run went wrong, with its chain.

`explain` gathers the failure signals of every node of a tree and names the earliest:

- `verdict_fail`: a validation with verdict `fail` on a node (a child's report, or the root's
  answer under the root validator); the step is the node's last `submit_report` call before the
  verdict (its last assistant message when it submitted none);
- `refusal`: a tool result the runner refused (`cyber_agent/trace/models.py:is_refusal`);
  the step is that tool message;
- `budget`, `stopped`, `error`: a node that ended `failed` or `stopped` — `budget` when its error
  names a budget or limit, `stopped` when a stop was requested, else `error`; the step is its
  last message.

Signals are ordered by time, then the deeper node first (a child's fault precedes the parent
that merely reported it), then goal-tree order (preorder of the tree). Verdicts that are
consequences — a parent's review, a report that only forwards a child's failure — are not signals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from cyber_agent.analysis.tree import tree_from_records
from cyber_agent.errors import ConfigurationError
from cyber_agent.trace.models import is_refusal
from cyber_agent.trace.protocols import TraceReader
from cyber_agent.trace.records import TraceRecord, parse_time
from cyber_agent.trace.side_records import StopRequest

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Attribution", "SIGNAL_COLUMNS", "explain", "failure_signals"]

SignalKind = Literal["verdict_fail", "refusal", "budget", "stopped", "error"]
SIGNAL_COLUMNS = ("order", "created_at", "trace_id", "depth", "role", "step", "kind", "detail")
"""Columns of `Attribution.signals`."""

_BUDGET_WORDS = ("budget", "limit", "quota", "exceeded")


@dataclass(frozen=True)
class Attribution:
    """Where a run went wrong: the node, the step (message sequence), why, and the chain from the root."""

    root: str
    trace_id: str | None
    """The first node that went wrong (None: no failure signal in the tree)."""
    step: int | None
    """The message sequence in that node where it went wrong."""
    kind: SignalKind | None
    detail: str
    chain: list[str] = field(default_factory=list)
    """Trace ids from the root down to `trace_id` (both included)."""
    signals: Any = None
    """Every failure signal of the tree as a frame (`SIGNAL_COLUMNS`), earliest first."""

    def __repr__(self) -> str:
        return f"Attribution(trace_id={self.trace_id!r}, step={self.step}, kind={self.kind!r}, detail={self.detail[:80]!r})"


def _time(value: Any) -> datetime | None:
    return parse_time(value) if value else None


def _report_step(messages: Sequence[Mapping[str, Any]], before: datetime | None) -> int | None:
    step, last = None, None
    for message in messages:
        if message.get("role") != "assistant":
            continue
        when = _time(message.get("created_at"))
        if before is not None and when is not None and when > before:
            break
        last = int(message["sequence"])
        content = message.get("content")
        if isinstance(content, Mapping) and any(c.get("name") == "submit_report" for c in content.get("tool_calls") or ()):
            step = last
    return step if step is not None else last


def _signals(record: TraceRecord, stops: Mapping[str, StopRequest]) -> list[dict[str, Any]]:
    meta, out = record.trace, []
    protocol = meta.get("protocol") or {}
    for validation in protocol.get("validations") or ():
        if validation.get("verdict") == "fail":
            when = _time(validation.get("created_at"))
            out.append({"created_at": when, "step": _report_step(record.messages, when), "kind": "verdict_fail",
                        "detail": f"{validation.get('scope')} validator: {validation.get('summary') or 'fail'}"})
    for message in record.messages:
        if message.get("role") == "tool" and is_refusal(message.get("metadata")):
            content = message.get("content")
            text = content if isinstance(content, str) else str((content or {}).get("text") or "")
            out.append({"created_at": _time(message.get("created_at")), "step": int(message["sequence"]),
                        "kind": "refusal", "detail": f"{message.get('tool_name')} refused: {text[:200]}"})
    status = meta.get("status")
    if status in ("failed", "stopped"):
        error = str(meta.get("error_message") or "")
        stop = stops.get(record.trace_id)
        kind: SignalKind = "budget" if any(w in error.lower() for w in _BUDGET_WORDS) else \
            "stopped" if stop is not None or status == "stopped" else "error"
        detail = error or (f"stop requested: {stop.reason}" if stop else f"ended {status}")
        last = int(record.messages[-1]["sequence"]) if record.messages else None
        out.append({"created_at": _time(meta.get("completed_at") or meta.get("updated_at")), "step": last,
                    "kind": kind, "detail": detail})
    return out


async def failure_signals(store: TraceReader, root: str) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    """Every failure signal of the tree under `root`, earliest first, and each node's parent."""
    if not isinstance(root, str) or not root:
        raise ConfigurationError("root", f"must be a trace id string, got {root!r}; pass the root's trace_id")
    records = await store.read_records([root], messages=True, events=False)
    tree = tree_from_records(records, root)
    stops = await store.get_stop_requests([r.trace_id for r in records])
    order = {node.trace_id: index for index, node in enumerate(tree.preorder())}
    rows: list[dict[str, Any]] = []
    for record in records:
        node = tree.nodes.get(record.trace_id)
        if node is None or node.role == "validator":
            continue  # a validator's verdict is recorded on its target
        for signal in _signals(record, stops):
            rows.append({"order": order[node.trace_id], "trace_id": node.trace_id, "depth": node.depth,
                         "role": node.role, **signal})
    far = datetime.max.replace(tzinfo=None)
    rows.sort(key=lambda r: ((r["created_at"].replace(tzinfo=None) if r["created_at"] else far), -r["depth"], r["order"]))
    return rows, {t: n.parent for t, n in tree.nodes.items()}


async def explain(store: TraceReader, root: str) -> Attribution:
    """The first node and step where the run under `root` went wrong, why, and the chain to it."""
    import pandas as pd

    rows, parents = await failure_signals(store, root)
    signals: pd.DataFrame = pd.DataFrame(rows, columns=list(SIGNAL_COLUMNS))
    if not rows:
        return Attribution(root=root, trace_id=None, step=None, kind=None, detail="no failure signal in the tree",
                           signals=signals)
    first = rows[0]
    chain, current = [], first["trace_id"]
    while current is not None:
        chain.append(current)
        current = parents.get(current) if current != root else None
    return Attribution(root=root, trace_id=first["trace_id"], step=first["step"], kind=first["kind"],
                       detail=first["detail"], chain=chain[::-1], signals=signals)
