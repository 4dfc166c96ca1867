"""Per-run harness (SPEC H3, H4, H5): dialect wrapping, context guard, tool-result shaping.

The loop stays dialect-agnostic: a non-native dialect wraps the model call
(`cyber_agent/llm/dialects.py:DialectLLM`). Before each provider call the context guard may
compact the in-memory history (old tool results cleared, then the middle summarized); the
stored messages stay whole, and every compaction is recorded in the trace as a `compaction`
event plus, when it cost a model call, a side-branch message carrying that cost. After each
tool call the result goes through the payload summarizer: summarized when over the byte
budget (three consecutive failures disable it), truncated with an explicit marker as the last
resort.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from cyber_agent.core.summarizer import PayloadSummarizer
from cyber_agent.llm.dialects import DialectLLM, choose_dialect
from cyber_agent.llm.types import LLMCall, LLMResponse
from cyber_agent.trace.compaction import CompactionResult, ContextGuard, HistorySummarizer, estimate_tokens
from cyber_agent.trace.models import Message, MessageContent, Trace

if TYPE_CHECKING:
    from cyber_agent.core.config import RunConfig
    from cyber_agent.core.resource_budget import ResourceBudgetController
    from cyber_agent.trace.protocols import TraceStore

__all__ = ["HarnessRun", "RunHarness", "wrap_dialect"]


class HarnessRun(Protocol):
    """The slice of a run's state the harness reads and updates (`core/run_state.py:RunState` has it)."""

    trace: Trace
    history: list[dict[str, Any]]
    goal_id: str | None
    head: int
    cost: float

MAX_SUMMARIZER_INPUT_BYTES = 400_000


def wrap_dialect(llm: LLMCall, *, provider: str | None, model: str, override: str) -> LLMCall:
    """Wrap `llm` in its tool-call dialect unless it is native (an injected llm_call is native unless told)."""
    if provider is None and override == "auto":
        return llm
    dialect = choose_dialect(provider or "custom", model, None if override == "auto" else override)
    return llm if dialect.name == "native" else DialectLLM(llm, dialect)


def _budgeted(llm: LLMCall, budget: ResourceBudgetController) -> LLMCall:
    """Count helper model calls (summaries) against the tree budget like any other call."""

    async def call(messages: list[dict[str, Any]], model: str, tools: Any = None, temperature: float | None = None,
                   **_: Any) -> LLMResponse:
        await budget.reserve_llm_call()
        response = LLMResponse.coerce(await llm(messages, model, tools, temperature))
        await budget.book_llm_usage(prompt_tokens=response.usage.prompt_tokens,
                                    completion_tokens=response.usage.completion_tokens, cost_usd=response.cost)
        return response

    return call


class RunHarness:
    """The harness state of one run."""

    def __init__(self, *, llm: LLMCall, model: str, config: RunConfig, budget: ResourceBudgetController | None) -> None:
        helper_llm = _budgeted(llm, budget) if budget is not None else llm
        self.guard = ContextGuard(config.context_window) if config.context_window > 0 else None
        self._counted = 0
        self._tokens = 0
        self._reported: tuple[int, int] | None = None
        self.history_summarizer = HistorySummarizer(helper_llm, model)
        budget_bytes = config.tool_result_max_bytes
        self.payload = PayloadSummarizer(
            helper_llm, model, threshold_bytes=budget_bytes if config.summarize_tool_results else 0,
            max_input_bytes=MAX_SUMMARIZER_INPUT_BYTES, budget_bytes=budget_bytes,
        )

    def _estimate(self, history: list[dict[str, Any]]) -> int:
        """Token estimate of the history, updated incrementally so each step costs O(new messages).

        With a reported prompt size (`note_prompt`), the estimate is that figure plus chars/4 of
        what was appended since, whenever that is higher: chars/4 under-counts CJK text.
        """
        if len(history) < self._counted:  # the history was replaced (compaction): count it afresh
            self._counted, self._tokens = 0, 0
            self._reported = None
        if len(history) > self._counted:
            self._tokens += estimate_tokens(history[self._counted:])
            self._counted = len(history)
        if self._reported is not None and self._reported[1] <= len(history):
            tokens, sent = self._reported
            return max(self._tokens, tokens + estimate_tokens(history[sent:]))
        return self._tokens

    def note_prompt(self, prompt_tokens: int, sent: int) -> None:
        """Record the prompt tokens a provider reported for a call that sent the first `sent` history messages."""
        if prompt_tokens > 0:
            self._reported = (prompt_tokens, sent)

    async def compact(self, prepared: HarnessRun, store: TraceStore) -> CompactionResult | None:
        """Shrink the in-memory history when it nears the context window; record what was done."""
        if self.guard is None:
            return None
        tokens = self._estimate(prepared.history)
        if tokens < self.guard.micro_threshold * self.guard.context_window:
            return None  # the common case: far from the window, nothing to scan
        result = await self.guard.guard(prepared.history, self.history_summarizer, tokens=tokens)
        if result is None:
            return None
        prepared.history[:] = result.messages
        self._counted, self._tokens, self._reported = 0, 0, None
        trace_id = prepared.trace.trace_id
        await store.append_event(trace_id, "compaction", result.event_payload())
        if result.usage is not None or result.cost:
            await self._record_helper_call(prepared, store, "compaction", result.summary or "", result.usage, result.cost,
                                           {"compaction": result.kind, "tokens_before": result.tokens_before,
                                            "tokens_after": result.tokens_after})
        return result

    async def shape(self, prepared: HarnessRun, store: TraceStore, tool_name: str, content: str,
                    is_error: bool) -> tuple[str, dict[str, Any]]:
        """Return the result text the model will see, and metadata saying how it was shaped."""
        if self.payload.passes_through(content):
            return content, {}  # the common case, without building an outcome
        outcome = await self.payload.maybe_summarize(tool_name, content, is_error=is_error, hint=prepared.trace.task)
        if outcome.path == "passthrough":
            return content, {}
        if outcome.llm_called:
            await self._record_helper_call(prepared, store, "summarizer", outcome.text, outcome.usage, outcome.cost,
                                           {"payload": outcome.metadata()})
        return outcome.text, {"payload": outcome.metadata()}

    @staticmethod
    async def _record_helper_call(prepared: HarnessRun, store: TraceStore, branch: str, text: str, usage: Any,
                                  cost: float, metadata: dict[str, Any]) -> None:
        """Persist a helper model call on a side branch so its tokens and cost reach the trace totals."""
        message = Message.create(
            trace_id=prepared.trace.trace_id, role="assistant", goal_id=prepared.goal_id, branch=branch,
            content=MessageContent(text=text or f"({branch})"), parent_sequence=prepared.head or None,
            prompt_tokens=usage.prompt_tokens if usage else 0, completion_tokens=usage.completion_tokens if usage else 0,
            cached_tokens=usage.cached_tokens if usage else 0, cost=cost or 0.0, metadata=metadata,
        )
        await store.add_message(message)
        prepared.cost += cost or 0.0
