"""Oversized tool results go through a summarizer model before the agent sees them (SPEC H5).

`PayloadSummarizer.maybe_summarize` takes one tool result and returns what enters the history:

    passthrough  the result fits the byte budget and is under the summary threshold
    summarized   a one-shot summarizer call compressed it under an extraction contract
    truncated    the byte budget cut it (`cyber_agent/trace/compaction.py:truncate_result`)

Truncation is the last resort and always applies: whatever path is taken, the returned text is
within `budget_bytes`. Payloads above `max_input_bytes` are not worth a model call and are
truncated directly. `max_consecutive_failures` failed summaries in a row (an error, an empty
answer, or an answer no smaller than the input) disable the summarizer for the rest of the run;
one success resets the count. Use one instance per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from cyber_agent.llm.types import LLMCall, LLMResponse, Usage
from cyber_agent.trace.compaction import DEFAULT_TOOL_RESULT_BUDGET_BYTES, MIN_TOOL_RESULT_BUDGET_BYTES, truncate_result

__all__ = ["SUMMARIZER_SYSTEM_PROMPT", "PayloadSummarizer", "SummaryOutcome", "SummaryPath"]

SummaryPath = Literal["passthrough", "summarized", "truncated"]

SUMMARIZER_SYSTEM_PROMPT = """You are the summarizer. You compress one oversized tool output for another agent that will \
never see the raw output; it acts only on what you write.

Extraction contract:
- Keep verbatim every identifier: ids, names, file paths, URLs, keys, hashes, versions, dates.
- Keep every number the output states, with its unit and what it measures.
- Keep every error, warning and failure message verbatim, with where it occurred.
- Keep the structure: sections stay sections; tables become compact rows with their headers.
- Collapse repetition and say so ("… 412 more rows of the same shape, ids 88–500").
- Drop boilerplate, markup, styling and navigation text.
- Never invent, infer or round anything. If the output is truncated or unreadable, say so.
- If a parent task hint is given, put what serves it first.

Answer with the summary only, no preamble."""
"""System prompt of the summarizer call: the extraction contract (H5)."""


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, kw_only=True)
class SummaryOutcome:
    """What `maybe_summarize` did with one tool result."""

    path: SummaryPath
    """passthrough, summarized or truncated."""
    text: str
    """The text to put in the history (always within the byte budget)."""
    original_bytes: int
    """UTF-8 size of the raw result."""
    final_bytes: int
    """UTF-8 size of `text`."""
    reason: str
    """Why this path: under threshold, over max_input_bytes, disabled, error result, summary failure, ..."""
    truncated: bool = False
    """True when the byte budget cut the text (also a summary that came back too long)."""
    llm_called: bool = False
    """True when a summarizer call was made (its usage and cost are below, even if it failed)."""
    usage: Usage = field(default_factory=Usage)
    """Token usage of the summarizer call (zero when none was made)."""
    cost: float = 0.0
    """USD cost of the summarizer call."""
    cost_estimated: bool = False
    """True when `cost` is a price-table estimate."""
    error: str | None = None
    """Why the summary attempt failed, when it did."""

    def metadata(self) -> dict[str, Any]:
        """JSON-able record for the tool message's metadata (key `payload`)."""
        return {
            "path": self.path, "reason": self.reason, "original_bytes": self.original_bytes,
            "final_bytes": self.final_bytes, "truncated": self.truncated, "llm_called": self.llm_called,
            "summary_cost": self.cost, "error": self.error,
        }


class PayloadSummarizer:
    """Route oversized tool results through a one-shot summarizer call, with a circuit breaker."""

    def __init__(
        self,
        llm: LLMCall,
        model: str,
        *,
        threshold_bytes: int,
        max_input_bytes: int,
        max_consecutive_failures: int = 3,
        budget_bytes: int = DEFAULT_TOOL_RESULT_BUDGET_BYTES,
        temperature: float = 0.2,
    ) -> None:
        if max_consecutive_failures < 1:
            raise ValueError(f"max_consecutive_failures={max_consecutive_failures}; it must be at least 1")
        if 0 < budget_bytes < MIN_TOOL_RESULT_BUDGET_BYTES:
            raise ValueError(f"budget_bytes={budget_bytes}; use 0 (no budget) or at least {MIN_TOOL_RESULT_BUDGET_BYTES}")
        self.llm = llm
        self.model = model
        self.threshold_bytes = threshold_bytes
        """Results larger than this are summarized; 0 or less never summarizes."""
        self.max_input_bytes = max_input_bytes
        """Results larger than this skip the model and are truncated."""
        self.max_consecutive_failures = max_consecutive_failures
        self.budget_bytes = budget_bytes
        """Byte budget every returned text respects (0 disables it)."""
        self.temperature = temperature
        self.consecutive_failures = 0
        """Failed summaries since the last success."""

    @property
    def disabled(self) -> bool:
        """True once the breaker tripped; every later result is truncated without a model call."""
        return self.consecutive_failures >= self.max_consecutive_failures

    def passes_through(self, text: str) -> bool:
        """True when `text` reaches the model unchanged: under the summary threshold and the byte budget."""
        limits = [limit for limit in (self.threshold_bytes, self.budget_bytes) if limit > 0]
        # A str has at most 4 UTF-8 bytes per character, so a short one needs no encoding to measure.
        return not limits or 4 * len(text) <= min(limits) or _size(text) <= min(limits)

    def _fallback(self, text: str, original: int, reason: str, **extra: Any) -> SummaryOutcome:
        final, cut = truncate_result(text, self.budget_bytes)
        return SummaryOutcome(path="truncated" if cut else "passthrough", text=final, original_bytes=original,
                              final_bytes=_size(final), reason=reason, truncated=cut, **extra)

    def _skip_reason(self, size: int, is_error: bool) -> str | None:
        if self.threshold_bytes <= 0 or size <= self.threshold_bytes:
            return "under the summary threshold"
        if is_error:
            return "error results are never summarized"
        if self.disabled:
            return f"summarizer disabled after {self.consecutive_failures} consecutive failures"
        if size > self.max_input_bytes:
            return f"{size} bytes is over max_input_bytes ({self.max_input_bytes}); not worth a model call"
        return None

    def _request(self, tool_name: str, text: str, hint: str | None) -> list[dict[str, Any]]:
        hint_block = f"Parent task hint: {hint}\n\n" if hint else ""
        user = (f"Tool name: {tool_name}\n\n{hint_block}Raw tool output (summarize per the extraction contract in "
                f"your system prompt):\n\n--- BEGIN ---\n{text}\n--- END ---")
        return [{"role": "system", "content": SUMMARIZER_SYSTEM_PROMPT}, {"role": "user", "content": user}]

    async def maybe_summarize(
        self, tool_name: str, text: str, *, hint: str | None = None, is_error: bool = False
    ) -> SummaryOutcome:
        """Return the result as the agent should see it: passed through, summarized or truncated."""
        size = _size(text)
        skip = self._skip_reason(size, is_error)
        if skip is not None:
            return self._fallback(text, size, skip)
        try:
            response = LLMResponse.coerce(await self.llm(self._request(tool_name, text, hint), self.model, None, self.temperature))
        except Exception as exc:  # noqa: BLE001 — any failure falls back to truncation; CancelledError is not caught
            return self._failed(text, size, f"summarizer call failed: {type(exc).__name__}: {exc}", None)
        summary = response.content.strip()
        if not summary:
            return self._failed(text, size, "summarizer returned an empty summary", response)
        if _size(summary) >= size:
            return self._failed(text, size, f"summary ({_size(summary)} bytes) is not smaller than the output", response)
        self.consecutive_failures = 0
        framed = (f"[summary of {size} bytes of '{tool_name}' output by the payload summarizer; "
                  f"you have not seen the raw output]\n\n{summary}")
        final, cut = truncate_result(framed, self.budget_bytes)
        return SummaryOutcome(
            path="summarized", text=final, original_bytes=size, final_bytes=_size(final),
            reason=f"over the summary threshold ({self.threshold_bytes} bytes)", truncated=cut, llm_called=True,
            usage=response.usage, cost=response.cost, cost_estimated=response.cost_estimated,
        )

    def _failed(self, text: str, size: int, error: str, response: LLMResponse | None) -> SummaryOutcome:
        self.consecutive_failures += 1
        extra: dict[str, Any] = {"llm_called": True, "error": error}
        if response is not None:
            extra.update(usage=response.usage, cost=response.cost, cost_estimated=response.cost_estimated)
        return self._fallback(text, size, "summary failed; truncation is the fallback", **extra)
