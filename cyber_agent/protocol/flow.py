"""What a final text means in each role (SPEC A5): answer, report, reminder or validation.

- legacy agents and validators: the text is the answer;
- a recursive agent with reports to review: reminded to review first;
- a recursive child: the text becomes an implicit TaskReport (submit_report is preferred);
- the recursive root: its candidate answer completes only after the root validator accepts it;
  otherwise the verdict goes back to the root, which continues (at most `MAX_ROOT_ATTEMPTS`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cyber_agent.errors import RunError
from cyber_agent.protocol.mode import AgentPolicy
from cyber_agent.protocol.ports import ProtocolRunner
from cyber_agent.protocol.state import report_changes
from cyber_agent.protocol.validation import render_validation, run_validation
from cyber_agent.trace.models import Message, Trace, TraceStatus
from cyber_agent.trace.protocol_records import TaskReport

__all__ = ["MAX_ROOT_ATTEMPTS", "STATE_TOOLS", "FinalTextDecision", "RunView", "on_final_text"]

MAX_ROOT_ATTEMPTS = 3
# Tools whose call may change focus, protocol state or tool rights: the runner refreshes after them.
STATE_TOOLS = frozenset({"goal", "agent", "review_task", "submit_report", "submit_validation"})


@dataclass(kw_only=True)
class FinalTextDecision:
    """Messages appended, and (status, answer, error) when the run ends."""

    messages: list[Message] = field(default_factory=list)
    finish: tuple[TraceStatus, str | None, str | None] | None = None
    protocol: dict[str, Any] | None = None
    """Protocol changes the runner persists with the final status (one write of the trace)."""


class RunView(Protocol):
    """What the end-of-turn rules read of a running agent (`cyber_agent/core/run_state.py:RunState` satisfies it)."""

    @property
    def trace(self) -> Trace:
        """The trace as the run holds it."""
        ...

    @property
    def policy(self) -> AgentPolicy:
        """The tree's mode policy."""
        ...

    @property
    def is_validator(self) -> bool:
        """True for validator runs."""
        ...

    @property
    def branch(self) -> str | None:
        """The side branch the run writes to (a reflection), or None on the main path."""
        ...

    root_validations: int
    """Root validations this run has started (the root gate counts its attempts)."""


Note = Callable[[str], Awaitable[Message]]
"""Append a user message to the running agent's history and return it."""


async def on_final_text(runner: ProtocolRunner, prepared: RunView, text: str, *, note: Note) -> FinalTextDecision:
    """Decide what a model turn without tool calls means for this run (`note` appends a reminder)."""
    trace = prepared.trace
    if not prepared.policy.is_recursive or prepared.is_validator or prepared.branch is not None:
        # A side branch (reflection) is never an answer of the protocol: no report, no validator.
        return FinalTextDecision(finish=("completed", text, None))
    pending = trace.protocol.pending_reviews
    if pending:
        reminder = await note(
            f"[protocol] Before finishing, review every child report with review_task: pending {', '.join(pending)}.",
        )
        return FinalTextDecision(messages=[reminder])
    if trace.parent_trace_id is not None:
        # Nothing is acknowledged between the report and the end of the run: the runner stores the
        # report with the final status, and a run that dies before that gets a runner-written report.
        report = TaskReport(outcome="partial", summary=text.strip() or "(empty answer)", submitted_by="implicit")
        return FinalTextDecision(finish=("completed", text, None), protocol=report_changes(report))
    anchor = trace.root_setup.anchor if trace.root_setup is not None else None
    if anchor is None:
        raise RunError(f"recursive root {trace.trace_id!r} has no root task anchor; start a new task")
    result = await run_validation(
        runner, target=trace, scope="root", criteria=list(anchor.completion_criteria), report=None,
        answer=text,
    )
    if result.verdict == "pass":
        return FinalTextDecision(finish=("completed", text, None))
    prepared.root_validations += 1
    if prepared.root_validations >= MAX_ROOT_ATTEMPTS:
        return FinalTextDecision(finish=(
            "failed", None, f"root validator did not accept the answer after {MAX_ROOT_ATTEMPTS} attempts: {result.summary}"
        ))
    verdict = await note("[root validator] Your answer was not accepted.\n" + render_validation(result) + "\nRevise and answer again.")
    return FinalTextDecision(messages=[verdict])
