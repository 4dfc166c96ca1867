"""One protocol step, one write: the recursive runner merges consecutive record updates.

Each test counts the store calls a step makes (a trace update rewrites `meta.json`, a goal update
`goal.json`, a usage update `resource_usage.json`) and checks that the records and events it
leaves are the ones the unmerged writes left.
"""

from __future__ import annotations

import asyncio
from typing import Any

from recursive_helpers import (
    REVIEW_TURN,
    ROOT,
    TASK,
    TreeModel,
    brief,
    call,
    clean_agent_env,  # noqa: F401  (autouse fixture)
    delegate,
    make_runner,
    pending_children,
    recursive_config,
    trace_by_objective,
)

from cyber_agent.core.resource_budget import ResourceBudget, ResourceBudgetController
from cyber_agent.llm.types import LLMResponse
from cyber_agent.trace import InMemoryTraceStore, Trace


class CountingStore(InMemoryTraceStore):
    """Records every trace, goal and usage update: (method, trace id, updated fields and changed protocol keys)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str, tuple[str, ...]]] = []

    async def _keys(self, trace_id: str, updates: dict[str, Any]) -> tuple[str, ...]:
        keys = tuple(sorted(updates))
        if "protocol" in updates:  # name the protocol fields this write changes
            before = (await self.get_trace(trace_id)).protocol
            after = updates["protocol"]
            keys = tuple(k for k in keys if k != "protocol")
            keys += tuple(f"protocol.{k}" for k in sorted(type(after).model_fields)
                          if getattr(before, k) != getattr(after, k))
        return keys

    async def update_trace(self, trace_id: str, **updates: Any) -> Trace:
        self.log.append(("update_trace", trace_id, await self._keys(trace_id, updates)))
        return await super().update_trace(trace_id, **updates)

    async def end_trace(self, trace_id: str, updates: Any, *, goal: Any = None) -> Trace:
        # One write that holds a goal update and a trace update: counted as each of them.
        if goal is not None:
            self.log.append(("update_goal", trace_id, tuple(sorted(goal[1]))))
        self.log.append(("update_trace", trace_id, await self._keys(trace_id, dict(updates))))
        return await super().end_trace(trace_id, updates, goal=goal)

    async def update_goal(self, trace_id: str, goal_id: str, **updates: Any) -> Any:
        self.log.append(("update_goal", trace_id, tuple(sorted(updates))))
        return await super().update_goal(trace_id, goal_id, **updates)

    async def replace_resource_usage(self, root_trace_id: str, usage: dict[str, Any]) -> None:
        self.log.append(("replace_resource_usage", root_trace_id, ()))
        await super().replace_resource_usage(root_trace_id, usage)

    async def update_resource_usage(self, root_trace_id: str, change: Any) -> Any:
        def counted(current: Any) -> Any:
            new = change(current)
            if new is not None:  # only a step that writes is a write
                self.log.append(("replace_resource_usage", root_trace_id, ()))
            return new

        return await super().update_resource_usage(root_trace_id, counted)

    def writes(self, trace_id: str, method: str = "update_trace") -> list[tuple[str, ...]]:
        return [keys for name, tid, keys in self.log if name == method and tid == trace_id]


async def _run(model: TreeModel, **config: Any) -> tuple[CountingStore, Trace]:
    store = CountingStore()
    runner, _ = make_runner(model.llm, store)
    result = await runner.run_result(TASK, recursive_config(**config))
    assert result.status == "completed", result.trace.error_message
    return store, result.trace


# ---- validation ------------------------------------------------------------------------------------
async def test_a_validation_writes_its_target_once_with_the_count_and_the_result():
    store, root = await _run(TreeModel({ROOT: [delegate(brief("A"))]}))
    child = await trace_by_objective(store, "A")
    protocol = child.protocol.model_dump(mode="json")
    assert protocol["validator_count"] == 1 and [v["verdict"] for v in protocol["validations"] if v["scope"] != "evidence"] == ["pass"]
    # report (submit_report), status (finish), count + verdict (one write), review: four writes, not five.
    writes = store.writes(child.trace_id)
    assert len(writes) == 4
    assert [w for w in writes if "protocol.validations" in w] == [writes[2]]
    assert "protocol.validator_count" in writes[2]
    assert root.protocol.model_dump(mode="json")["validator_count"] == 1


async def test_a_validator_left_behind_keeps_its_id(monkeypatch):
    """A validator created before a crash, whose count never reached the target, is not overwritten."""
    from datetime import UTC, datetime

    from cyber_agent.protocol import validation

    fixed = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    real = validation.new_sub_trace_id
    monkeypatch.setattr(validation, "new_sub_trace_id", lambda parent, mode, seq: real(parent, mode, seq, now=fixed))
    store = CountingStore()
    runner, _ = make_runner(TreeModel({ROOT: [delegate(brief("A"))]}).llm, store)
    planted: list[str] = []
    create = store.create_trace

    async def create_trace(trace: Trace, **kwargs: object) -> str:
        created = await create(trace, **kwargs)
        if trace.lineage.created_by_tool == "agent":  # the child: plant a leftover on its first id
            leftover = Trace.create(trace_id=real(trace.trace_id, "validator", 1, now=fixed), task="left behind",
                                    parent_trace_id=trace.trace_id)
            planted.append(await create(leftover))
        return created

    monkeypatch.setattr(store, "create_trace", create_trace)
    result = await runner.run_result(TASK, recursive_config())
    assert result.status == "completed", result.trace.error_message
    child = await trace_by_objective(store, "A")
    protocol = child.protocol.model_dump(mode="json")
    judged = [v for v in protocol["validations"] if v["scope"] != "evidence"]
    assert judged[0]["verdict"] == "pass" and protocol["validator_count"] == 2
    assert judged[0]["validator_trace_id"] == real(child.trace_id, "validator", 2, now=fixed)
    assert (await store.get_trace(planted[0])).task == "left behind"


# ---- reports ---------------------------------------------------------------------------------------
async def test_an_implicit_report_is_stored_with_the_final_status():
    store, _ = await _run(TreeModel({ROOT: [delegate(brief("A"))], "A": [LLMResponse(content="A is done")]}))
    child = await trace_by_objective(store, "A")
    report = child.protocol.model_dump(mode="json")["report"]
    assert (report["outcome"], report["summary"], report["submitted_by"]) == ("partial", "A is done", "implicit")
    writes = store.writes(child.trace_id)
    finishing = [w for w in writes if "status" in w]
    assert len(finishing) == 1 and "protocol.report" in finishing[0]
    assert not any("protocol.report" in w and "status" not in w for w in writes)
    # The events are those of a report stored first: goal, status, completion, in that order.
    types = [e.type for e in await store.get_events(child.trace_id)]
    assert types[-3:] == ["goal_updated", "trace_status_changed", "trace_completed"]
    assert child.status == "completed" and child.result_summary == "A is done"


async def test_a_runner_written_report_and_its_fail_verdict_are_one_write():
    store, _ = await _run(TreeModel({ROOT: [delegate(brief("B"))], "B": [call("list_files", path=".")] * 5}),
                          max_iterations=3)
    child = await trace_by_objective(store, "B")
    protocol = child.protocol.model_dump(mode="json")
    assert (protocol["report"]["submitted_by"], protocol["report"]["outcome"]) == ("runner", "failed")
    assert [v["verdict"] for v in protocol["validations"] if v["scope"] != "evidence"] == ["fail"]
    merged = [w for w in store.writes(child.trace_id) if "protocol.report" in w and "status" not in w]
    assert len(merged) == 1 and "protocol.validations" in merged[0]


async def test_a_revision_reopens_the_child_in_the_same_write_as_its_review():
    turns = iter(["revise", "accept"])

    def review(messages, names):
        decision = next(turns)
        return call("review_task", child_trace_id=pending_children(messages)[0], decision=decision,
                    feedback="more detail" if decision == "revise" else "")

    store, root = await _run(TreeModel({ROOT: [delegate(brief("C"))], ROOT + REVIEW_TURN: [review, review]}))
    child = await trace_by_objective(store, "C")
    protocol = child.protocol.model_dump(mode="json")
    assert protocol["review"]["decision"] == "accept" and protocol["validator_count"] == 2
    assert [v["verdict"] for v in protocol["validations"] if v["scope"] != "evidence"] == ["pass", "pass"]
    writes = store.writes(child.trace_id)
    reopen = next(i for i, w in enumerate(writes) if "protocol.review" in w)
    # review + cleared report/ended_by in one write; continue_child found nothing left to clear.
    assert {"protocol.review", "protocol.report", "protocol.ended_by"} <= set(writes[reopen])
    assert writes[reopen + 1] == ("error_message", "status")  # the continued run starts
    # The parent's goal is marked pending_review for each report, once in progress again.
    goal_id = root.current_goal_id
    events = [e for e in await store.get_events(root.trace_id) if e.type == "goal_updated"
              and e.payload.get("patch") == {"status": "pending_review"}]
    assert len(events) == 2 and all(e.payload["goal_id"] == goal_id for e in events)


# ---- usage -----------------------------------------------------------------------------------------
async def _fresh(**limits: Any) -> tuple[CountingStore, ResourceBudgetController]:
    store = CountingStore()
    root = Trace.create(task="t")
    await store.create_trace(root)
    controller = ResourceBudgetController(store=store, root_trace_id=root.trace_id, budget=ResourceBudget(**limits),
                                          lock=asyncio.Lock())
    await controller.initialize()
    store.log.clear()
    return store, controller


def _usage_fields(usage: Any) -> dict[str, Any]:
    return usage.model_dump(exclude={"started_at", "updated_at"})


async def test_validation_work_that_counts_nothing_writes_nothing():
    store, controller = await _fresh()
    await controller.record_validation_work(material_chars=0)
    assert store.log == []
    await controller.record_validation_work(tool_calls=1)
    assert len(store.log) == 1 and (await controller.usage()).validation_tool_calls == 1


async def test_a_call_without_tokens_or_cost_books_nothing():
    store, controller = await _fresh()
    assert await controller.book_llm_usage(prompt_tokens=0, completion_tokens=0, cost_usd=0.0) is None
    assert store.log == []
    assert await controller.book_llm_usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.0) is None
    assert len(store.log) == 1 and (await controller.usage()).total_tokens == 5


async def test_a_call_without_tokens_still_flags_a_tree_already_over_its_limit():
    store, controller = await _fresh(max_total_tokens=4)
    assert await controller.book_llm_usage(prompt_tokens=3, completion_tokens=2, cost_usd=0.0) == "tokens: used 5 of 4"
    store.log.clear()
    assert await controller.book_llm_usage(prompt_tokens=0, completion_tokens=0, cost_usd=0.0) == "tokens: used 5 of 4"
    assert len(store.log) == 1 and (await controller.usage()).refusals == 2
