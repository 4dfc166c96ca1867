"""Independent validators (SPEC A5, A11): each validation scope runs as its own trace.

A validator trace (`agent_type="validator"`, `lineage.created_by_tool="validator"`,
`protocol.validator` naming its scope, target and criteria) is a sub-trace of the trace it judges. It reads the persisted
trajectory and artifacts through its tools — the report is a claim, not evidence — and submits
a verdict per completion criterion. Validators count for calls, tokens, cost, time and
validation work in the tree budget, but not as agents or children. A validator that crashes,
runs out of budget or ends without submitting yields `unknown`, never `pass`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from cyber_agent.protocol.ports import ChildSetup, ChildSpec, ProtocolRunner
from cyber_agent.protocol.state import append_validation
from cyber_agent.protocol.tool_rights import VALIDATOR_TOOLS
from cyber_agent.trace.models import Trace
from cyber_agent.trace.protocol_records import CriterionVerdict, TaskReport, ValidationResult, ValidationScope, aggregate_verdict
from cyber_agent.trace.state import ProtocolState, ValidatorAssignment
from cyber_agent.trace.trace_id import new_sub_trace_id

__all__ = ["render_validation", "run_validation"]

VALIDATOR_MAX_ITERATIONS = 12


def _validation_task(target: Trace, scope: ValidationScope, criteria: list[str], report: TaskReport | None, answer: str | None,
                     web: bool = False) -> str:
    lines = [
        f"# Validation ({scope})",
        f"Target trace: {target.trace_id}",
        "Judge each completion criterion ONLY on persisted evidence: read the target's trajectory with "
        "read_trajectory, artifacts with read_artifact, and source files with read_file. The report or answer "
        "below is the target's own claim, not evidence. When the evidence is insufficient, the verdict is unknown.",
        *(["Public facts may be checked with web_search and fetch_page; anything they cannot confirm is unknown."]
          if web else []),
        "",
        "Completion criteria:",
    ]
    lines += [f"{i}. {c}" for i, c in enumerate(criteria, start=1)]
    if report is not None:
        lines += ["", "Report (claim):", json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=1)]
    if answer is not None:
        lines += ["", "Candidate answer (claim):", answer]
    lines += ["", 'Finish with submit_validation(verdicts=[{"criterion": 1, "verdict": "pass|fail|unknown", '
              '"evidence": "..."}, ...], summary="...").']
    return "\n".join(lines)


def _unknown(target: Trace, scope: ValidationScope, criteria: list[str], summary: str, validator_id: str | None) -> ValidationResult:
    return ValidationResult(
        scope=scope, target_trace_id=target.trace_id, validator_trace_id=validator_id, verdict="unknown",
        criteria=[CriterionVerdict(criterion=c, verdict="unknown", evidence=summary) for c in criteria], summary=summary,
    )


async def run_validation(
    runner: ProtocolRunner, *, target: Trace, scope: ValidationScope, criteria: list[str],
    report: TaskReport | None, answer: str | None,
) -> ValidationResult:
    """Run one validator trace on `target` and record its result on the target."""
    store = runner.trace_store
    root_id = target.root_id
    root = target if root_id == target.trace_id else await store.get_trace(root_id)
    # One validation of a target at a time in this process; its validator count is persisted with
    # the result (one write of the target, not two).
    async with runner.lock(f"validation:{target.trace_id}"):
        return await _validate(runner, target=target, scope=scope, criteria=criteria, report=report, answer=answer,
                               root=root)


async def _validate(
    runner: ProtocolRunner, *, target: Trace, scope: ValidationScope, criteria: list[str], report: TaskReport | None,
    answer: str | None, root: Trace | None,
) -> ValidationResult:
    store = runner.trace_store
    setup = root.root_setup if root is not None else None
    snapshot_config: dict[str, Any] = target.run_config.config if target.run_config is not None else {}
    models = setup.validator_models if setup is not None else None
    if models is not None:
        model = models.root if scope == "root" else models.criteria
    else:
        model = str(snapshot_config.get("model", "demo"))
    # The caller's copy of the target may predate earlier validations (the root's running copy does):
    # count from the stored trace so every validator gets a new id. The count is persisted with the
    # result; a validator left behind by a crash before that still holds its id, so skip taken ids.
    stored = await store.get_trace(target.trace_id)
    count = (stored or target).protocol.validator_count + 1
    validator_id = new_sub_trace_id(target.trace_id, "validator", count)
    while await store.get_trace(validator_id) is not None:
        count += 1
        validator_id = new_sub_trace_id(target.trace_id, "validator", count)
    web = setup.validator_search.enabled if setup is not None else False
    child = ChildSetup(tool_snapshot=VALIDATOR_TOOLS, created_by_tool="validator", protocol=ProtocolState(
        validator=ValidatorAssignment(scope=scope, target_trace_id=target.trace_id, criteria=criteria,
                                      web_evidence_enabled=web),
    ), parent=stored or target, root=root)
    try:
        # The validator inherits the judged run's harness settings (dialect, budgets, workspace) from
        # its persisted snapshot; its role sets the model and the iteration cap.
        run = await runner.run_child(ChildSpec(
            parent_trace_id=target.trace_id, trace_id=validator_id, agent_type="validator", inherit=snapshot_config,
            overrides={"model": model, "max_iterations": VALIDATOR_MAX_ITERATIONS}, setup=child, events=False,
            messages=[{"role": "user", "content": _validation_task(target, scope, criteria, report, answer, web)}],
        ))
        submitted = run.trace.protocol.validation
        if submitted is not None:
            result = submitted
        else:
            reason = run.trace.error_message or "the validator ended without submitting a verdict"
            result = _unknown(target, scope, criteria, f"no verdict ({run.trace.status}): {reason}", validator_id)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a crashing validator must yield unknown, never pass
        result = _unknown(target, scope, criteria, f"validator crashed: {type(exc).__name__}: {exc}", validator_id)
    judged = {c.criterion: c for c in result.criteria}
    aligned = [judged.get(c) or CriterionVerdict(criterion=c, verdict="unknown", evidence="not judged") for c in criteria]
    result = result.model_copy(update={
        "criteria": aligned, "verdict": aggregate_verdict([c.verdict for c in aligned]), "validator_trace_id": validator_id,
    })
    await append_validation(store, target.trace_id, result, validator_count=count)
    return result


def render_validation(result: ValidationResult) -> str:
    """Render a validation result as text for a parent or the root."""
    lines = [f"Validation [{result.scope}] verdict: {result.verdict} (validator {result.validator_trace_id})"]
    for index, item in enumerate(result.criteria, start=1):
        lines.append(f"  {index}. [{item.verdict}] {item.criterion} — {item.evidence}")
    if result.summary:
        lines.append(f"  summary: {result.summary}")
    return "\n".join(lines)
