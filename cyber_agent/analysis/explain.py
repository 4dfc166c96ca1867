"""Failure attribution: the first node and step where a stored run went wrong, with its chain.

`explain` gathers the failure signals of every node of a tree and names the earliest:

- `verdict_fail`: a validation with verdict `fail` on a node (a child's report, or the root's
  answer under the root validator); the step is the node's last `submit_report` call before the
  verdict (its last assistant message when it submitted none);
- `evidence_fail`: the evidence check (`cyber_agent/protocol/evidence_check.py`) found a claim
  of the node's report or final answer unsupported by its own trajectory — the check recorded
  before the validator (scope `evidence`), or, for a node without one (a legacy agent, a
  recursive root, an imported trace), the check run here (`check_claims`, no model call); the
  step is as for a verdict;
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
from cyber_agent.protocol.evidence_check import check_claims
from cyber_agent.trace.models import is_refusal
from cyber_agent.trace.protocols import TraceReader
from cyber_agent.trace.records import TraceRecord, parse_time
from cyber_agent.trace.side_records import StopRequest

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Attribution", "EvidenceMode", "SIGNAL_COLUMNS", "SignalKind", "explain", "failure_signals"]

SignalKind = Literal["verdict_fail", "evidence_fail", "refusal", "budget", "stopped", "error"]
EvidenceMode = Literal["check", "recorded", "off"]
"""How `explain` uses the evidence check: recorded checks plus a check of every node without one
(`check`), recorded checks only (`recorded`), or not at all (`off`: to see what it adds)."""
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


def _evidence_detail(summary: str, claims: Sequence[Mapping[str, Any]]) -> str:
    failed = [c for c in claims if c.get("verdict") == "fail"]
    if not failed:
        return f"evidence check: {summary or 'fail'}"
    first = failed[0]
    what = f"claim {int(first['claim']) + 1}" if first.get("claim") is not None else "report"
    return f"evidence check: {len(failed)} unsupported ({what} {first.get('code')}: {first.get('reason')})"


def _signals(record: TraceRecord, stops: Mapping[str, StopRequest], evidence: EvidenceMode) -> list[dict[str, Any]]:
    meta, out = record.trace, []
    protocol = meta.get("protocol") or {}
    for validation in protocol.get("validations") or ():
        if validation.get("verdict") != "fail":
            continue
        when = _time(validation.get("created_at"))
        if validation.get("scope") == "evidence":
            if evidence != "off":
                out.append({"created_at": when, "step": _report_step(record.messages, when), "kind": "evidence_fail",
                            "detail": _evidence_detail(str(validation.get("summary") or ""), validation.get("claims") or ())})
            continue
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


def _unchecked(record: TraceRecord) -> bool:
    """A node that answered (a report or a final text) and whose answer no recorded evidence check judged."""
    meta = record.trace
    protocol = meta.get("protocol") or {}
    if any(v.get("scope") == "evidence" for v in protocol.get("validations") or ()):
        return False
    return bool(protocol.get("report") or meta.get("result_summary"))


async def _checked(store: TraceReader, record: TraceRecord, workspace: str | None) -> dict[str, Any] | None:
    """The evidence check of a node without a recorded one, as a signal when it fails (None otherwise)."""
    result = await check_claims(store, record.trace_id, workspace=workspace)
    if result.verdict != "fail":
        return None
    step = _report_step(record.messages, None)
    at = next((m.get("created_at") for m in record.messages if step is not None and int(m["sequence"]) == step), None)
    when = _time(at) or _time(record.trace.get("completed_at") or record.trace.get("updated_at"))
    claims = [c.model_dump(mode="json") for c in result.claims]
    return {"created_at": when, "step": step, "kind": "evidence_fail", "detail": _evidence_detail(result.summary, claims)}


async def failure_signals(store: TraceReader, root: str, *, evidence: EvidenceMode = "check",
                          workspace: str | None = None) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    """Every failure signal of the tree under `root`, earliest first, and each node's parent."""
    if not isinstance(root, str) or not root:
        raise ConfigurationError("root", f"must be a trace id string, got {root!r}; pass the root's trace_id")
    if evidence not in ("check", "recorded", "off"):
        raise ConfigurationError("evidence", f"must be 'check', 'recorded' or 'off', got {evidence!r}")
    records = await store.read_records([root], messages=True, events=False)
    tree = tree_from_records(records, root)
    stops = await store.get_stop_requests([r.trace_id for r in records])
    order = {node.trace_id: index for index, node in enumerate(tree.preorder())}
    rows: list[dict[str, Any]] = []
    for record in records:
        node = tree.nodes.get(record.trace_id)
        if node is None or node.role == "validator":
            continue  # a validator's verdict is recorded on its target
        signals = _signals(record, stops, evidence)
        if evidence == "check" and _unchecked(record):
            checked = await _checked(store, record, workspace)
            signals.extend([checked] if checked is not None else [])
        for signal in signals:
            rows.append({"order": order[node.trace_id], "trace_id": node.trace_id, "depth": node.depth,
                         "role": node.role, **signal})
    far = datetime.max.replace(tzinfo=None)
    rows.sort(key=lambda r: ((r["created_at"].replace(tzinfo=None) if r["created_at"] else far), -r["depth"], r["order"]))
    return rows, {t: n.parent for t, n in tree.nodes.items()}


async def explain(store: TraceReader, root: str, *, evidence: EvidenceMode = "check",
                  workspace: str | None = None) -> Attribution:
    """The first node and step where the run under `root` went wrong, why, and the chain to it.

    `evidence` says how the evidence check counts (`EvidenceMode`); `workspace` is where the
    check looks for artifacts of nodes it checks here (default: each run's configured workspace).
    """
    import pandas as pd

    rows, parents = await failure_signals(store, root, evidence=evidence, workspace=workspace)
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
