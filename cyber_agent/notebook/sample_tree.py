"""A big recursive-mode tree written offline into a store: for tests, benches and notebook 07.

    from cyber_agent.notebook.sample_tree import write_sample_tree
    sample = write_sample_tree(".trace-sample", traces=1000)   # a directory (file store) or any TraceStore
    sample.root_trace_id

Nothing runs: the plan (a revenue audit of regions → products → months → invoice batches, delegated
by the root to `delegate` agents and by them to `explore` agents) is drawn
from a seeded `random.Random`, then every trace is written through the TraceStore API as a run
would leave it — `create_trace` with its lineage and protocol (brief, report, validations,
reviews), `update_goal_tree` with its plan, and `add_message` for a few model turns and tool
results whose token counts and costs are simulated (a reference price of $3 / $15 per million
input / output tokens). Every agent below the root is judged by a validator; about a fifth of the
first reports fail and are revised, judged by a second validator; a few agents fail or stop, and
their plans are left open. The same seed gives the same tree (ids and times included).
"""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC
from typing import Any, Literal

from cyber_agent.errors import InvalidIdError
from cyber_agent.notebook.bridge import run_sync
from cyber_agent.protocol.mode import MAX_CHILDREN_PER_PARENT
from cyber_agent.trace import FileSystemTraceStore, Goal, GoalTree, Message, Trace
from cyber_agent.trace.goal_models import GoalStatus, GoalType
from cyber_agent.trace.protocols import TraceStore
from cyber_agent.trace.trace_id import MAX_TRACE_ID_LENGTH, new_sub_trace_id

__all__ = ["SampleTree", "awrite_sample_tree", "max_traces", "write_sample_tree"]

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
"""When the sample run starts (so a seed gives the same ids and times)."""
PRICE_PER_TOKEN = (3.0e-6, 15.0e-6)
"""Simulated USD per input and per output token."""
_REGIONS = ("East", "North", "West", "South", "Central", "Nordic", "Iberia", "Benelux", "Alpine", "Baltic", "Balkans",
            "Levant")
_PRODUCTS = ("hardware", "software", "licences", "services", "support", "training", "cloud", "consulting",
             "spare parts", "subscriptions", "rentals", "warranties")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
Kind = Literal["main", "delegate", "explore", "validator"]


@dataclass(frozen=True, kw_only=True)
class SampleTree:
    """What `write_sample_tree` wrote."""

    root_trace_id: str
    """The root of the tree."""
    traces: int
    """Traces written (agents and validators, the root included)."""
    agents: int
    """Traces that are not validators (the root included)."""
    validators: int
    """Validator traces."""
    depth: int
    """Deepest agent level below the root."""
    failed: int
    """Agents that ended failed."""
    stopped: int
    """Agents that ended stopped."""


@dataclass
class _Node:
    trace_id: str
    parent: _Node | None
    kind: Kind
    depth: int
    topic: tuple[str, ...]
    created: datetime
    children: list[_Node] = field(default_factory=list)
    validators: list[_Node] = field(default_factory=list)
    status: str = "completed"
    verdicts: list[str] = field(default_factory=list)  # per validator of this agent, in order


def _objective(node: _Node) -> str:
    region, product, month, batch = (*node.topic, "", "", "", "")[:4]
    if node.depth == 0:
        return "Audit the 2026 revenue of every region and product line and name the regions whose books do not reconcile"
    if node.depth == 1:
        return f"Audit the revenue of region {region}"
    if node.depth == 2:
        return f"Check the {product} sales of region {region}"
    if node.depth == 3:
        return f"Reconcile the {product} invoices of region {region} for {month}"
    if node.depth == 4:
        return f"Recompute invoice batch {batch} of {month} for the {product} sales of region {region}"
    return f"Verify the line items of batch {batch} (part {node.topic[-1]}) of region {region}"


def _child_topic(node: _Node, index: int) -> tuple[str, ...]:
    pools: tuple[tuple[str, ...], ...] = (_REGIONS, _PRODUCTS, _MONTHS)
    if node.depth < len(pools):
        pool = pools[node.depth]
        word = pool[index % len(pool)] + (f" {index // len(pool) + 1}" if index >= len(pool) else "")
    else:
        word = str(index + 1)
    return (*node.topic, word)


class _Planner:
    """Draws the tree: breadth first, each agent up to `MAX_CHILDREN_PER_PARENT` children, until `traces` are planned."""

    def __init__(self, rng: random.Random, traces: int, max_depth: int, seed: int) -> None:
        self.rng, self.traces, self.max_depth, self.seed = rng, traces, max_depth, seed
        self.seconds = iter(range(0, 10**9, 3))
        self.root = _Node(trace_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)), parent=None, kind="main", depth=0,
                          topic=(), created=START)
        self.order = [self.root]

    def full(self) -> bool:
        return len(self.order) >= self.traces

    def add_child(self, parent: _Node) -> _Node:
        """One more child of `parent` (with the validators of its reports, while traces are left)."""
        rng = self.rng
        created = START + timedelta(seconds=next(self.seconds))
        mode: Kind = "delegate" if parent.depth == 0 else "explore"
        child = _Node(trace_id=new_sub_trace_id(parent.trace_id, mode, len(parent.children) + 1, now=created),
                      parent=parent, kind=mode, depth=parent.depth + 1, topic=_child_topic(parent, len(parent.children)),
                      created=created)
        parent.children.append(child)
        self.order.append(child)
        roll = rng.random()
        child.status = "failed" if roll < 0.05 else "stopped" if roll < 0.08 else "completed"
        if child.status == "completed":
            first = "fail" if rng.random() < 0.2 else "unknown" if rng.random() < 0.05 else "pass"
            child.verdicts = [first] if first == "pass" else [first, "pass" if rng.random() < 0.85 else "fail"]
        for number in range(1, len(child.verdicts) + 1):
            if self.full():
                child.verdicts = child.verdicts[: number - 1]
                break
            stamp = created + timedelta(seconds=1 + number)
            validator = _Node(trace_id=new_sub_trace_id(child.trace_id, "validator", number, now=stamp), parent=child,
                              kind="validator", depth=child.depth + 1, topic=child.topic, created=stamp)
            child.validators.append(validator)
            self.order.append(validator)
        return child

    def plan(self) -> list[_Node]:
        """Every trace of the tree, parents before children, breadth first."""
        rng, quota = self.rng, MAX_CHILDREN_PER_PARENT
        queue: list[_Node] = [self.root]
        leaves: list[_Node] = []
        while not self.full() and (queue or leaves):
            if not queue:  # every open agent was a leaf: open the earliest leaves after all
                queue, leaves = leaves, []
            parent = queue.pop(0)
            if parent.depth > 1 and rng.random() < 0.3 and queue:  # the root's delegates all delegate further
                leaves.append(parent)
                continue
            wanted = min(quota, rng.randint(5, 8) if parent.depth == 0 else rng.randint(3, 7))
            while len(parent.children) < wanted and not self.full():
                child = self.add_child(parent)
                if child.depth < self.max_depth:
                    queue.append(child)
        # The drawn shape holds fewer traces than asked: give the agents more children, up to the
        # quota, shallowest first; then revise reports that passed at once (a second validator).
        while not self.full():
            open_agents = [n for n in self.order if n.kind != "validator" and n.depth < self.max_depth
                           and len(n.children) < quota]
            if not open_agents:
                break
            for parent in sorted(open_agents, key=lambda n: n.depth):
                if self.full():
                    break
                self.add_child(parent)
        for node in [n for n in self.order if n.kind != "validator" and len(n.verdicts) == 1]:
            if self.full():
                break
            node.verdicts = ["fail", "pass"]
            stamp = node.created + timedelta(seconds=3)
            validator = _Node(trace_id=new_sub_trace_id(node.trace_id, "validator", 2, now=stamp), parent=node,
                              kind="validator", depth=node.depth + 1, topic=node.topic, created=stamp)
            node.validators.append(validator)
            self.order.append(validator)
        if not self.full():
            unjudged = sum(n.status != "completed" for n in self.order if n.parent is not None and n.kind != "validator")
            raise ValueError(f"traces={self.traces}: seed {self.seed} draws a tree of at most {len(self.order)} traces "
                             f"at max_depth={self.max_depth} ({quota} children per agent, each judged twice, but its "
                             f"{unjudged} failed or stopped agents are not judged); ask for fewer traces, a larger "
                             "max_depth, or another seed")
        return self.order


def _deepest_depth() -> int:
    """The deepest agent level whose validators' ids fit in `MAX_TRACE_ID_LENGTH` (the id spells the lineage)."""
    trace_id, depth = str(uuid.UUID(int=0, version=4)), 0
    while True:
        child = new_sub_trace_id(trace_id, "delegate" if depth == 0 else "explore", 999, now=START)
        try:
            new_sub_trace_id(child, "validator", 999, now=START)
        except InvalidIdError:
            return depth
        trace_id, depth = child, depth + 1


def max_traces(max_depth: int) -> int:
    """Most traces any seed can draw at `max_depth`: a full tree of 6 children per agent, each judged twice."""
    agents: int = sum(int(MAX_CHILDREN_PER_PARENT) ** depth for depth in range(1, max_depth + 1))
    return 1 + 3 * agents


def _turn(rng: random.Random, trace_id: str, goal: str, tool: str, arguments: dict[str, Any], result: str,
          when: datetime, first: int) -> list[Message]:
    """An assistant message calling `tool` and the tool's result."""
    prompt, completion = rng.randint(700, 3200), rng.randint(40, 420)
    call_id = f"call_{first}"
    return [
        Message.create(trace_id=trace_id, role="assistant", goal_id=goal, parent_sequence=first - 1 or None,
                       prompt_tokens=prompt, completion_tokens=completion,
                       cost=round(prompt * PRICE_PER_TOKEN[0] + completion * PRICE_PER_TOKEN[1], 8),
                       duration_ms=float(rng.randint(300, 4000)), created_at=when, metadata={"model": "sample-model"},
                       content={"text": None, "tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}),
        Message.create(trace_id=trace_id, role="tool", goal_id=goal, parent_sequence=first, tool_call_id=call_id,
                       tool_name=tool, content=result, created_at=when + timedelta(milliseconds=400),
                       duration_ms=float(rng.randint(5, 300)), metadata={"is_error": False}),
    ]


def _records(node: _Node) -> tuple[dict[str, Any], dict[str, Any]]:
    """(protocol, report) of an agent: its brief, report, the validations of it and its reviews of its children."""
    objective = _objective(node)
    criteria = [f"the result of '{objective}' is computed from the source ledger",
                "every figure names the ledger rows it comes from"]
    summary = {"completed": f"{objective}: done, the figures reconcile",
               "failed": f"{objective}: failed, the ledger could not be read",
               "stopped": f"{objective}: stopped before its children reported"}[node.status]
    report = {"outcome": "completed" if node.status == "completed" else "failed", "summary": summary,
              "outputs": [f"{' / '.join(node.topic) or 'all regions'}: reconciled"] if node.status == "completed" else [],
              "evidence": ["ledger rows 1-240 summed"] if node.status == "completed" else [],
              "open_issues": [] if node.status == "completed" else ["the figures of this part are missing"],
              "submitted_by": "tool" if node.status == "completed" else "runner"}
    validations = []
    for number, (validator, verdict) in enumerate(zip(node.validators, node.verdicts)):
        judged = [verdict, "pass"] if verdict != "pass" else ["pass", "pass"]
        validations.append({
            "scope": "criteria", "target_trace_id": node.trace_id, "validator_trace_id": validator.trace_id,
            "verdict": verdict, "summary": f"report {number + 1}: {verdict}",
            "criteria": [{"criterion": c, "verdict": v, "evidence": "recomputed from the ledger"} for c, v in zip(criteria, judged)],
            "created_at": (validator.created + timedelta(seconds=1)).isoformat(),
        })
    reviews = []
    for child in node.children:
        for verdict in child.verdicts:
            reviews.append({"child_trace_id": child.trace_id, "decision": "accept" if verdict == "pass" else "revise",
                            "feedback": "" if verdict == "pass" else "the validator could not confirm the totals"})
    protocol: dict[str, Any] = {"validations": validations, "reviews": reviews, "children": [c.trace_id for c in node.children]}
    if node.depth > 0:
        protocol.update(brief={"objective": objective, "completion_criteria": criteria}, report=report)
    return protocol, report


def _goals(node: _Node, objective: str, summary: str | None, ended: datetime) -> list[Goal]:
    """The plan: the objective (goal 1) and three steps under it; a failed or stopped agent leaves it open.

    An agent with children delegates in step 2 (an `agent_call` holding their trace ids); a
    leaf reads, computes and reports. Validators have one goal.
    """
    if node.kind == "validator":
        return [Goal(id="1", description="Validation (criteria)", status="completed", created_at=node.created,
                     completed_at=ended)]
    where = " / ".join(node.topic) or "every region"
    steps = ([f"Split the work on {where} into {len(node.children)} parts", f"Delegate the {len(node.children)} parts",
              "Review the reports and merge them"] if node.children else
             [f"Read the ledger of {where}", "Compute the totals", "Report the totals"])
    reached = 3 if node.status == "completed" else 2  # where a failed or stopped agent was
    goals = [Goal(id="1", description=objective, status="completed" if node.status == "completed" else "in_progress",
                  summary=summary if node.status == "completed" else None, created_at=node.created,
                  completed_at=ended if node.status == "completed" else None)]
    for number, description in enumerate(steps, 1):
        status: GoalStatus = "completed" if number < reached or node.status == "completed" else (
            "in_progress" if number == reached else "pending")
        kind: GoalType = "agent_call" if node.children and number == 2 else "normal"
        goals.append(Goal(id=str(number + 1), parent_id="1", description=description, type=kind, status=status,
                          sub_trace_ids=[c.trace_id for c in node.children] if kind == "agent_call" else [],
                          created_at=node.created, completed_at=ended if status == "completed" else None))
    return goals


async def _write(store: TraceStore, rng: random.Random, node: _Node, root_id: str) -> None:
    objective = _objective(node)
    ended = node.created + timedelta(seconds=2 + 2 * len(node.validators))
    lineage = {"mode": "recursive", "depth": node.depth, "root_trace_id": root_id, "child_count": len(node.children),
               "created_by_tool": None if node.parent is None else "validator" if node.kind == "validator" else "agent"}
    if node.kind == "validator":
        target = node.parent
        assert target is not None
        task = f"# Validation (criteria)\nTarget trace: {target.trace_id}\nJudge the report of: {_objective(target)}"
        protocol: dict[str, Any] = {"validator": {"scope": "criteria", "target_trace_id": target.trace_id}}
        summary, error = "verdicts submitted", None
    else:
        task = objective if node.parent is None else f"# Task brief\nObjective: {objective}"
        protocol, report = _records(node)
        summary = str(report["summary"])
        error = {"completed": None, "failed": f"read_file: ledger/{'/'.join(node.topic)}.csv: permission denied",
                 "stopped": "child quota: 6 of 6 agents used; a batch of 3 would exceed it"}[node.status]
    await store.create_trace(Trace.model_validate({
        "trace_id": node.trace_id, "task": task, "parent_trace_id": node.parent.trace_id if node.parent else None,
        "parent_goal_id": ("1" if node.kind == "validator" else "3") if node.parent else None, "agent_type": node.kind, "model": "sample-model",
        "status": node.status, "result_summary": summary, "error_message": error, "lineage": lineage, "protocol": protocol,
        "created_at": node.created, "updated_at": ended, "completed_at": ended,
    }))
    goals = _goals(node, objective, summary, ended)
    done = node.status == "completed"
    await store.update_goal_tree(node.trace_id, GoalTree(mission=task, goals=goals, current_id=None if done else goals[-1].id,
                                                         next_id=len(goals) + 1, cascade_completion=False))
    where = "/".join(node.topic) or "all"
    tools: list[tuple[str, dict[str, Any], str]]
    if node.kind == "validator":
        tools = [("read_trajectory", {"trace_id": node.parent.trace_id if node.parent else ""}, "8 messages"),
                 ("submit_validation", {"verdicts": "…"}, "validation recorded")]
    elif node.children:
        tools = [("agent", {"briefs": len(node.children)}, f"{len(node.children)} reports"),
                 ("submit_report", {"outcome": "completed"}, "report recorded")]
    else:
        tools = [("read_file", {"path": f"ledger/{where}.csv"}, "240 rows"), ("submit_report", {"outcome": "completed"}, "report recorded")]
    if node.status != "completed":
        tools = tools[:1]
    sequence = 1
    for number, (tool, arguments, result) in enumerate(tools):
        goal = "1" if node.kind == "validator" else (("3" if node.children else "2"), "4")[number]
        for message in _turn(rng, node.trace_id, goal, tool, arguments, result, node.created + timedelta(seconds=number),
                             sequence):
            await store.add_message(message)
        sequence += 2


def _draw(*, traces: int, seed: int, max_depth: int) -> tuple[list[_Node], random.Random]:
    """Check the request and draw the tree (nothing written); raise ValueError saying why it cannot be drawn."""
    if type(traces) is not int or traces < 1:
        raise ValueError(f"traces must be an int of at least 1, got {traces!r}")
    deepest = _deepest_depth()
    if type(max_depth) is not int or not 1 <= max_depth <= deepest:
        raise ValueError(f"max_depth must be from 1 to {deepest}, got {max_depth!r}: a trace id spells its whole lineage, "
                         f"and a validator of an agent {deepest + 1} levels deep would have an id longer than "
                         f"{MAX_TRACE_ID_LENGTH} characters (MAX_TRACE_ID_LENGTH)")
    if traces > (most := max_traces(max_depth)):
        raise ValueError(f"traces={traces} does not fit in a tree {max_depth} levels deep: with at most "
                         f"{MAX_CHILDREN_PER_PARENT} children per agent (the recursive quota) and two validators each, "
                         f"it holds at most {most} traces; raise max_depth (up to {deepest}) or ask for fewer")
    rng = random.Random(seed)
    return _Planner(rng, traces, max_depth, seed).plan(), rng


async def awrite_sample_tree(
    store: TraceStore | str | os.PathLike[str], *, traces: int = 1000, seed: int = 7, max_depth: int = 5,
) -> SampleTree:
    """Write a recursive-mode tree of `traces` traces (agents and validators) into `store`; return what was written."""
    order, rng = _draw(traces=traces, seed=seed, max_depth=max_depth)
    target: TraceStore = FileSystemTraceStore(store) if isinstance(store, (str, os.PathLike)) else store
    root_id = order[0].trace_id
    for node in order:
        await _write(target, rng, node, root_id)
    flush = getattr(target, "flush", None)
    if flush is not None:
        await flush()
    agents = [n for n in order if n.kind != "validator"]
    return SampleTree(root_trace_id=root_id, traces=len(order), agents=len(agents), validators=len(order) - len(agents),
                      depth=max(n.depth for n in agents), failed=sum(n.status == "failed" for n in agents),
                      stopped=sum(n.status == "stopped" for n in agents))


def write_sample_tree(
    store: TraceStore | str | os.PathLike[str], *, traces: int = 1000, seed: int = 7, max_depth: int = 5,
) -> SampleTree:
    """Sync twin of `awrite_sample_tree` (works inside a running notebook loop too)."""
    return run_sync(awrite_sample_tree(store, traces=traces, seed=seed, max_depth=max_depth))
