"""What a final text means in each role (SPEC A5): answer, report, reminder or validation.

- legacy agents and validators: the text is the answer;
- a recursive agent with reports to review: reminded to review first;
- a recursive child: the text becomes an implicit TaskReport (submit_report is preferred);
- the recursive root: its candidate answer completes only after the root validator accepts it;
  otherwise the verdict goes back to the root, which continues (at most `MAX_ROOT_ATTEMPTS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cyber_agent.core.protocol_state import report_changes
from cyber_agent.core.run_state import RunState
from cyber_agent.core.runner_api import RunContext
from cyber_agent.core.task_protocol import TaskReport
from cyber_agent.core.validation import render_validation, run_validation
from cyber_agent.errors import RunError
from cyber_agent.protocol.claims import claims_from_text
from cyber_agent.trace.models import Message, TraceStatus

__all__ = ["MAX_ROOT_ATTEMPTS", "STATE_TOOLS", "FinalTextDecision", "on_final_text"]

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


async def on_final_text(ctx: RunContext, prepared: RunState, text: str) -> FinalTextDecision:
    """Decide what a model turn without tool calls means for this run."""
    trace = prepared.trace
    if not prepared.policy.is_recursive or prepared.is_validator or prepared.branch is not None:
        # A side branch (reflection) is never an answer of the protocol: no report, no validator.
        return FinalTextDecision(finish=("completed", text, None))
    pending = trace.protocol.pending_reviews
    if pending:
        note = await ctx.services.append_user_message(
            prepared,
            f"[protocol] Before finishing, review every child report with review_task: pending {', '.join(pending)}.",
        )
        return FinalTextDecision(messages=[note])
    if trace.parent_trace_id is not None:
        # Nothing is acknowledged between the report and the end of the run: the runner stores the
        # report with the final status, and a run that dies before that gets a runner-written report.
        report = TaskReport(outcome="partial", summary=text.strip()[:4000] or "(empty answer)", submitted_by="implicit",
                            claims=claims_from_text(text))
        return FinalTextDecision(finish=("completed", text, None), protocol=report_changes(report))
    anchor = trace.root_setup.anchor if trace.root_setup is not None else None
    if anchor is None:
        raise RunError(f"recursive root {trace.trace_id!r} has no root task anchor; start a new task")
    result = await run_validation(
        ctx.runner, target=trace, scope="root", criteria=list(anchor.completion_criteria), report=None,
        answer=text,
    )
    if result.verdict == "pass":
        return FinalTextDecision(finish=("completed", text, None))
    prepared.root_validations += 1
    if prepared.root_validations >= MAX_ROOT_ATTEMPTS:
        return FinalTextDecision(finish=(
            "failed", None, f"root validator did not accept the answer after {MAX_ROOT_ATTEMPTS} attempts: {result.summary}"
        ))
    note = await ctx.services.append_user_message(
        prepared, "[root validator] Your answer was not accepted.\n" + render_validation(result) + "\nRevise and answer again.",
    )
    return FinalTextDecision(messages=[note])
