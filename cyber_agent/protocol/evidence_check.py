"""The deterministic evidence check: a report's claims against the persisted tree (no model call).

`check_report` judges each claim of a child's report by its citations
(`cyber_agent/trace/claim_records.py:EvidenceRef`) and adds whole-report signals; the result is
a `ValidationResult` of scope `evidence` with one `ClaimVerdict` per claim and per signal that
fired. It reads only the store's records (traces, messages) and the workspace files an
artifact names, so it gives the same answer in any process that opens the store.
`check_claims` runs the same check over any trace: a recursive child's report, or — for a
legacy sub-agent, a root or an imported trace — the claims of its final answer, whose numbers
and quoted names are looked up in its own tool results.

Per claim, in order: the cited trace exists and is the reporter or one of its agent-created
descendants; the cited message / tool result exists (and is not an error); the quote occurs in
it; an expression's operands occur in it; a cited child returned, passed and was not rejected;
an artifact exists, was touched by a tool call and is unchanged since the report; every number
the claim states occurs in a cited text or is a cited expression's value (a number that a
cited child's *rejected* report held is `repeats_rejected`). A claim without citations is
looked up in the whole trajectory: `unknown` when everything it states occurs there, `fail`
when something occurs nowhere. Whole-report signals: results after zero tool calls, and
`completed` over a tool error that no later call of the same tool recovered from.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from cyber_agent.protocol.claims import (
    Claim,
    ClaimVerdict,
    EvidenceRef,
    claim_numbers,
    claims_from_text,
    expression_value,
    has_number,
    has_quote,
    matches,
    numbers_of,
    quoted_names,
)
from cyber_agent.trace.models import Message, Trace
from cyber_agent.trace.protocol_records import TaskReport, ValidationResult, aggregate_verdict
from cyber_agent.trace.protocols import TraceReader

__all__ = ["NOT_WORK_TOOLS", "check_claims", "check_report", "rejected_claims", "render_evidence"]

NOT_WORK_TOOLS = frozenset({"submit_report", "goal", "review_task"})
"""Tool calls that are bookkeeping, not work: a report after only these is a report after zero tool calls."""
_EXCERPT = 90


@dataclass
class _Reading:
    """What one check has read from the store (each trace and message list once)."""

    store: TraceReader
    reporter: Trace
    workspace: Path
    traces: dict[str, Trace | None] = field(default_factory=dict)
    messages: dict[str, list[Message]] = field(default_factory=dict)

    async def trace(self, trace_id: str) -> Trace | None:
        if trace_id not in self.traces:
            self.traces[trace_id] = self.reporter if trace_id == self.reporter.trace_id else await self.store.get_trace(trace_id)
        return self.traces[trace_id]

    async def path(self, trace_id: str) -> list[Message]:
        if trace_id not in self.messages:
            trace = await self.trace(trace_id)
            self.messages[trace_id] = [] if trace is None else await self.store.get_main_path_messages(trace_id, trace.head_sequence)
        return self.messages[trace_id]


@dataclass
class _Found:
    """One resolved citation: its text (None when it failed) and the verdict that failed it."""

    text: str | None
    location: str
    failure: ClaimVerdict | None = None
    values: list[float] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


def _excerpt(text: str, needle: str) -> str:
    at = text.casefold().find(needle.casefold()) if needle else -1
    if at < 0:
        return " ".join(text[: 2 * _EXCERPT].split())
    start = max(0, at - _EXCERPT // 2)
    return ("…" if start else "") + " ".join(text[start : at + len(needle) + _EXCERPT].split()) + "…"


def _number_excerpt(text: str, stated: str) -> str:
    for number in numbers_of(text):
        if matches(stated, float(number)):
            return _excerpt(text, number)
    return _excerpt(text, "")


def _is_error(message: Message) -> bool:
    return bool(message.metadata.is_error)


def rejected_claims(trace: Trace) -> list[str]:
    """Texts of the claims of `trace`'s reports that were rejected (evidence or criteria validation failed)."""
    out: list[str] = []
    validations = trace.protocol.validations
    for index, result in enumerate(validations):
        if result.scope != "evidence":
            continue
        following = validations[index + 1] if index + 1 < len(validations) else None
        judged = following if following is not None and following.scope == "criteria" else None
        if result.verdict == "fail" or (judged is not None and judged.verdict == "fail"):
            out += [c.text for c in result.claims if c.claim is not None]
    return out


def _report_text(report: TaskReport) -> str:
    return "\n".join([report.summary, *report.outputs, *(c.text for c in report.claims)])


async def _reachable(reading: _Reading, trace_id: str, index: int, claim: Claim, ref: EvidenceRef) -> _Found | Trace:
    reporter = reading.reporter.trace_id
    location = ref.location(reporter)
    trace = await reading.trace(trace_id)
    if trace is None:
        return _Found(None, location, _fail(index, claim, "unknown_trace", f"trace {trace_id!r} does not exist", location))
    mine = trace_id == reporter or (trace_id.startswith(reporter + "@") and trace.lineage.created_by_tool == "agent"
                                    and not trace.is_validator)
    if not mine or trace.root_id != reading.reporter.root_id:
        return _Found(None, location, _fail(index, claim, "unreachable_trace",
                                            f"trace {trace_id!r} is not {reporter!r} nor one of its children's traces", location))
    return trace


def _fail(index: int | None, claim: Claim | None, code: str, reason: str, location: str = "", excerpt: str = "") -> ClaimVerdict:
    return ClaimVerdict.model_validate({"claim": index, "text": claim.text if claim else code, "verdict": "fail", "code": code,
                                        "reason": reason, "location": location, "excerpt": excerpt,
                                        "evidence": claim.evidence if claim else []})


async def _resolve(reading: _Reading, index: int, claim: Claim, ref: EvidenceRef) -> _Found:
    trace_id = ref.trace_id or reading.reporter.trace_id
    location = ref.location(reading.reporter.trace_id)
    if ref.kind == "artifact":
        return await _artifact(reading, index, claim, ref, location)
    trace = await _reachable(reading, trace_id, index, claim, ref)
    if isinstance(trace, _Found):
        return trace
    if ref.kind == "child_report":
        return _child(trace, index, claim, location)
    messages = await reading.path(trace_id)
    if ref.kind == "message":
        message = next((m for m in messages if m.sequence == ref.sequence), None)
        if message is None:
            return _Found(None, location, _fail(index, claim, "unknown_message",
                                                f"{trace_id!r} has no message {ref.sequence} on its main path", location))
    else:
        message = next((m for m in messages if m.role == "tool" and m.tool_call_id == ref.tool_call_id), None)
        if message is None:
            return _Found(None, location, _fail(index, claim, "unknown_tool_call",
                                                f"{trace_id!r} has no result of a tool call {ref.tool_call_id!r}", location))
    text = message.text or "\n".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    if _is_error(message):
        return _Found(None, location, _fail(index, claim, "cites_error", "the cited tool result is an error", location,
                                            _excerpt(text, "")))
    found = _Found(text, location)
    if ref.quote and not has_quote(text, ref.quote):
        found.failure = _fail(index, claim, "quote_not_found", f"the quote {ref.quote!r} is not in the cited text", location,
                              _excerpt(text, ""))
    elif ref.expression:
        value, operands = expression_value(ref.expression)
        missing = [o for o in operands if not has_number(text, o)]
        if value is None or missing:
            why = f"operand(s) {', '.join(missing[:5])} are not in the cited text" if missing else "it is not arithmetic"
            found.failure = _fail(index, claim, "expression_mismatch", f"the expression {ref.expression[:80]!r}: {why}",
                                  location, _excerpt(text, missing[0] if missing else ""))
        else:
            found.values.append(value)
    return found


def _child(trace: Trace, index: int, claim: Claim, location: str) -> _Found:
    report = trace.protocol.report
    if trace.status in ("failed", "stopped") or report is None or report.submitted_by == "runner" or report.outcome == "failed":
        why = f"the child ended {trace.status}" + (f" with a failed report: {report.summary}" if report else " without a report")
        return _Found(None, location, _fail(index, claim, "child_not_returned", why[:300], location))
    text = _report_text(report)
    latest = trace.protocol.validations[-1] if trace.protocol.validations else None
    review = trace.protocol.review
    if latest is not None and latest.verdict == "fail":
        return _Found(None, location, _fail(index, claim, "child_rejected",
                                            f"the child's report failed its {latest.scope} validation", location, _excerpt(text, "")))
    if review is not None and review.decision in ("replan", "split", "fail"):
        return _Found(None, location, _fail(index, claim, "child_rejected",
                                            f"the parent's review rejected the child's report ({review.decision})", location))
    return _Found(text, location, rejected=rejected_claims(trace))


def _file_bytes(path: Path) -> bytes | None:
    path = path.resolve()
    return path.read_bytes() if path.is_file() else None


async def _artifact(reading: _Reading, index: int, claim: Claim, ref: EvidenceRef, location: str) -> _Found:
    if ref.message_id:
        message = await reading.store.get_message(ref.message_id)
        if message is None:
            return _Found(None, location, _fail(index, claim, "artifact_missing", f"message {ref.message_id!r} does not exist", location))
        digest, text = hashlib.sha256(message.text.encode()).hexdigest(), message.text
    else:
        data = await asyncio.to_thread(_file_bytes, reading.workspace / str(ref.path))  # off the loop
        if data is None:
            return _Found(None, location, _fail(index, claim, "artifact_missing", f"{ref.path!r} is not a file of the workspace", location))
        digest, text = hashlib.sha256(data).hexdigest(), data[:20000].decode("utf-8", "replace")
        touched = any(str(ref.path) in str(call.arguments) for m in await reading.path(reading.reporter.trace_id) for call in m.tool_calls
                      if call.name not in NOT_WORK_TOOLS)
        if not touched:
            return _Found(None, location, _fail(index, claim, "artifact_untouched",
                                                f"no tool call of the trajectory names {ref.path!r}", location))
    if ref.sha256 and ref.sha256 != digest:
        return _Found(None, location, _fail(index, claim, "artifact_changed",
                                            f"its sha256 is {digest[:12]}…, the report recorded {ref.sha256[:12]}…", location))
    return _Found(text, location)


async def _judge(reading: _Reading, index: int, claim: Claim) -> ClaimVerdict:
    found = [await _resolve(reading, index, claim, ref) for ref in claim.evidence]
    failed = next((f.failure for f in found if f.failure is not None), None)
    if failed is not None:
        return failed
    texts = [(f.text or "", f.location) for f in found]
    values = [v for f in found for v in f.values]
    rejected = [r for f in found for r in f.rejected]
    for number in claim_numbers(claim.text):
        if any(matches(number, v) for v in values):
            continue
        holder = next(((t, loc) for t, loc in texts if has_number(t, number)), None)
        if holder is None:
            if any(has_number(r, number) for r in rejected):
                return _fail(index, claim, "repeats_rejected",
                             f"{number} is a claim of the child's rejected report, not of its accepted one", texts[0][1])
            where = ", ".join(loc for _, loc in texts)
            given = f"; its expression gives {', '.join(f'{v:.2f}'.rstrip('0').rstrip('.') for v in values)}" if values else ""
            quote = next((ref.quote for ref in claim.evidence if ref.quote), "")
            return _fail(index, claim, "number_not_found", f"{number} is not in the cited text{given}", where,
                         _excerpt(texts[0][0], quote) if texts else "")
    first = found[0]
    quote = claim.evidence[0].quote
    excerpt = _excerpt(first.text or "", quote) if quote else _number_excerpt(first.text or "", next(iter(claim_numbers(claim.text)), ""))
    return ClaimVerdict(claim=index, text=claim.text, verdict="pass", code="supported",
                        reason=f"{len(claim.evidence)} citation(s) hold what the claim states", location=first.location,
                        excerpt=excerpt, evidence=claim.evidence)


async def _sources(reading: _Reading) -> list[tuple[str, str]]:
    """The reporter's own non-error tool results and user messages: what an uncited claim may rest on."""
    out = []
    for message in await reading.path(reading.reporter.trace_id):
        if (message.role == "tool" and not _is_error(message)) or message.role == "user":
            out.append((message.text, f"{message.trace_id} message {message.sequence}"))
    return out


async def _uncited(reading: _Reading, index: int, claim: Claim, *, answer: bool = False) -> ClaimVerdict:
    sources = await _sources(reading)
    stated = claim_numbers(claim.text)
    names = quoted_names(claim.text)
    for number in stated:
        holder = next((s for s in sources if has_number(s[0], number)), None)
        if holder is None:
            return _fail(index, claim, "number_not_found", f"{number} occurs in none of the trace's tool results")
    for name in names:
        if not any(has_quote(text, name) for text, _ in sources):
            return _fail(index, claim, "quote_not_found", f"{name!r} occurs in none of the trace's tool results")
    where = next((loc for text, loc in sources for n in stated if has_number(text, n)), "")
    if not (stated or names):
        return ClaimVerdict(claim=index, text=claim.text, verdict="unknown", code="uncited",
                            reason="the claim cites nothing and states no number or quoted name to look up")
    holder_text = next((t for t, loc in sources if loc == where), "")
    # A report's claim must cite; a final answer (legacy, roots) cannot, so there the lookup is the check.
    return ClaimVerdict(claim=index, text=claim.text, verdict="pass" if answer else "unknown",
                        code="supported" if answer else "uncited",
                        reason=("cites nothing; " if not answer else "") + "what it states occurs in the trace's tool results",
                        location=where, excerpt=_number_excerpt(holder_text, stated[0]) if stated else "")


async def _signals(reading: _Reading, report: TaskReport) -> list[ClaimVerdict]:
    messages = await reading.path(reading.reporter.trace_id)
    calls = [c for m in messages if m.role == "assistant" for c in m.tool_calls if c.name not in NOT_WORK_TOOLS]
    out: list[ClaimVerdict] = []
    # A result is a claim that cites something or states a number or a quoted name; "done" is not one.
    results = [c for c in report.claims if c.evidence or claim_numbers(c.text) or quoted_names(c.text)]
    if results and report.outcome != "failed" and not calls:
        out.append(_fail(None, None, "no_tool_calls", f"{len(results)} result(s) reported after zero tool calls",
                         reading.reporter.trace_id))
    if report.outcome == "completed":
        names = {c.id: c.name for c in calls}
        last: dict[str, Message] = {}
        for message in messages:
            if message.role == "tool" and message.tool_call_id in names:
                last[names[message.tool_call_id]] = message
        # Failed work is an error of a tool that ran (its result records a run time). A refused call
        # (a limit) or one the permission gate or argument check stopped never ran: not failed work.
        errored = [m for m in last.values() if _is_error(m) and not m.metadata.is_refusal and m.metadata.duration_ms is not None]
        if errored:
            first = errored[0]
            out.append(_fail(None, None, "completed_over_errors",
                             f"outcome completed, but the last {first.tool_name or 'tool'} call failed and nothing recovered it",
                             f"{first.trace_id} message {first.sequence}", _excerpt(first.text, "")))
    return out


def _result(reading: _Reading, verdicts: list[ClaimVerdict]) -> ValidationResult:
    claims = [v for v in verdicts if v.claim is not None]
    signals = [v for v in verdicts if v.claim is None]
    verdict = "fail" if signals else aggregate_verdict([v.verdict for v in claims])
    failed = [v for v in verdicts if v.verdict == "fail"]
    summary = (f"{len(failed)} of {len(claims)} claim(s) or signals failed: " + "; ".join(f"{v.code}: {v.reason}" for v in failed[:3])
               if failed else f"{sum(v.verdict == 'pass' for v in claims)} of {len(claims)} claim(s) supported by their citations")
    return ValidationResult(scope="evidence", target_trace_id=reading.reporter.trace_id, verdict=verdict, summary=summary[:1000],
                            claims=verdicts)


def _workspace(trace: Trace, workspace: Path | str | None) -> Path:
    if workspace is not None:
        return Path(workspace)
    configured = trace.run_config.config.get("workspace") if trace.run_config is not None else None
    return Path(configured) if configured else Path.cwd()


async def check_report(store: TraceReader, trace: Trace, report: TaskReport | None = None, *,
                       workspace: Path | str | None = None) -> ValidationResult:
    """Check a child's report (default: its stored one) against the persisted tree; no model call."""
    report = report if report is not None else trace.protocol.report
    reading = _Reading(store, trace, _workspace(trace, workspace))
    if report is None:
        return _result(reading, [])
    verdicts = [await (_judge(reading, i, c) if c.evidence else _uncited(reading, i, c)) for i, c in enumerate(report.claims)]
    return _result(reading, verdicts + await _signals(reading, report))


async def check_claims(store: TraceReader, trace_id: str, *, workspace: Path | str | None = None) -> ValidationResult:
    """The evidence check over any trace: its report, or the claims of its final answer (legacy, roots, imports)."""
    trace = await store.get_trace(trace_id)
    if trace is None:
        raise LookupError(f"trace {trace_id!r} is not in this store; list the store's traces to find its id")
    if trace.protocol.report is not None:
        return await check_report(store, trace, workspace=workspace)
    reading = _Reading(store, trace, _workspace(trace, workspace))
    answer = trace.result_summary or ""
    return _result(reading, [await _uncited(reading, i, c, answer=True) for i, c in enumerate(claims_from_text(answer))])


def render_evidence(result: ValidationResult) -> str:
    """The check's findings as a validator reads them: per claim, the verdict, reason, location and cited excerpt."""
    lines = [f"Evidence check (deterministic, no model): {result.verdict} — {result.summary}"]
    for item in result.claims:
        head = f"claim {item.claim + 1}" if item.claim is not None else "report"
        lines.append(f"- {head} [{item.verdict}/{item.code}] {item.text}: {item.reason}"
                     + (f" @ {item.location}" if item.location else ""))
        if item.excerpt:
            lines.append(f"    cited: {item.excerpt}")
    return "\n".join(lines)
