"""A fork against its origin, node by node: which nodes were replayed or ran live, and what differs.

Nodes are matched by tree position (`cyber_agent/llm/call_site.py:tree_position`), so
`root/delegate-001/explore-002` of the fork is compared with the same position of the tree it
was forked from. A node's model calls count as *replayed* when the origin recorded an equal
request at that position (same `request_key`, counted as a multiset) and as *live* otherwise;
`cost_paid` is what the live calls cost (a replayed call costs nothing, though the tree books
the recorded cost so that an exact replay equals its origin). Report, verdicts and answer are
compared with trace ids normalised.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from cyber_agent.core.fork import fork_origin
from cyber_agent.errors import ConfigurationError, TraceNotFoundError
from cyber_agent.llm.call_site import normalise_ids, tree_position
from cyber_agent.trace.exchange_log import ExchangeLog
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocols import TraceStore

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DIFF_COLUMNS", "fork_diff", "fork_diff_rows"]

DIFF_COLUMNS = (
    "position", "depth", "in_origin", "in_fork", "state", "replayed_calls", "live_calls", "status_origin",
    "status_fork", "report_differs", "verdicts_origin", "verdicts_fork", "answer_differs", "cost_origin", "cost_fork",
    "cost_paid",
)
"""Columns of `fork_diff`, one row per tree position of either tree."""


async def _tree(store: TraceStore, root_id: str) -> dict[str, Trace]:
    out: dict[str, Trace] = {}
    for record in await store.read_records([root_id], messages=False, events=False):
        trace = Trace.model_validate(record.trace)
        out[tree_position(trace.trace_id)] = trace
    return out


async def _keys(store: TraceStore, trace_id: str) -> list[tuple[str, float]]:
    if not isinstance(store, ExchangeLog):
        return []
    return [(str(r.get("key")), float((r.get("response") or {}).get("cost") or 0.0)) for r in await store.get_exchanges(trace_id)]


def _report(trace: Trace | None) -> Any:
    report = trace.protocol.report if trace is not None and trace.protocol is not None else None
    return None if report is None else normalise_ids(report.model_dump(mode="json"))


def _verdicts(trace: Trace | None) -> str | None:
    if trace is None or trace.protocol is None or not trace.protocol.validations:
        return None
    return ",".join(str(v.verdict) for v in trace.protocol.validations)


def _answer(trace: Trace | None) -> Any:
    return None if trace is None else normalise_ids(trace.result_summary)


async def fork_diff_rows(store: TraceStore, fork_id: str, origin_id: str | None = None) -> list[dict[str, Any]]:
    """The rows of `fork_diff` as dicts (parents first, in position order)."""
    fork = await store.get_trace(fork_id)
    if fork is None:
        raise TraceNotFoundError(fork_id)
    if origin_id is None:
        origin = fork_origin(fork)
        if origin is None:
            raise ConfigurationError("fork_id", f"{fork_id!r} is not a fork (its root has no context['forked_from']); "
                                                "pass origin_id= to compare two trees")
        origin_id = origin.trace_id
    old, new = await _tree(store, origin_id), await _tree(store, fork_id)
    rows = []
    for position in sorted(set(old) | set(new), key=lambda p: (p.count("/"), p)):
        a, b = old.get(position), new.get(position)
        recorded = Counter(key for key, _ in (await _keys(store, a.trace_id) if a else []))
        replayed = live = 0
        paid = 0.0
        for key, cost in await _keys(store, b.trace_id) if b else []:
            if recorded[key] > 0:
                recorded[key] -= 1
                replayed += 1
            else:
                live += 1
                paid += cost
        state = "removed" if b is None else "added" if a is None else "live" if live and not replayed else \
            "mixed" if live else "replayed"
        rows.append({
            "position": position, "depth": position.count("/"), "in_origin": a is not None, "in_fork": b is not None,
            "state": state, "replayed_calls": replayed, "live_calls": live,
            "status_origin": a.status if a else None, "status_fork": b.status if b else None,
            "report_differs": json.dumps(_report(a), sort_keys=True) != json.dumps(_report(b), sort_keys=True),
            "verdicts_origin": _verdicts(a), "verdicts_fork": _verdicts(b),
            "answer_differs": _answer(a) != _answer(b),
            "cost_origin": a.total_cost if a else None, "cost_fork": b.total_cost if b else None, "cost_paid": paid,
        })
    return rows


async def fork_diff(store: TraceStore, fork_id: str, origin_id: str | None = None) -> pd.DataFrame:
    """One row per tree position of a fork and its origin (`DIFF_COLUMNS`); the origin is read from the fork's lineage."""
    import pandas as pd

    return pd.DataFrame(await fork_diff_rows(store, fork_id, origin_id), columns=list(DIFF_COLUMNS))
