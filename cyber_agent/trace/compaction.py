"""Tool-result byte budget and history compaction near the context window (SPEC H4).

Everything here works on the runner's history: a list of OpenAI-format message dicts whose
index 0 is the system prompt. Two rules hold for every function:

- the system prompt and the last N turns come back as the *same* dict objects, so their bytes
  (and the provider's prompt-cache prefix up to them) never change;
- a cut happens only at a turn boundary, so an assistant `tool_calls` message and the tool
  results answering it are kept or dropped together and the history stays valid for providers.

A *turn* is one assistant message plus everything up to the next assistant message (its tool
results and any runner-authored user messages). The *head* is the system prompt plus the user
messages before the first assistant message (the task).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cyber_agent.errors import LLMError
from cyber_agent.llm.types import LLMCall, LLMResponse, Usage

__all__ = [
    "CLEARED_PLACEHOLDER",
    "CompactionKind",
    "CompactionResult",
    "ContextGuard",
    "DEFAULT_TOOL_RESULT_BUDGET_BYTES",
    "HISTORY_SUMMARY_PREFIX",
    "HISTORY_SUMMARY_PROMPT",
    "HistorySummarizer",
    "MIN_TOOL_RESULT_BUDGET_BYTES",
    "SummarizeFn",
    "estimate_tokens",
    "micro_compact",
    "pairing_problems",
    "render_transcript",
    "summary_compact",
    "truncate_result",
]

DEFAULT_TOOL_RESULT_BUDGET_BYTES = 16 * 1024
"""Per-result byte budget of the original harness (`DEFAULT_TOOL_RESULT_BUDGET_BYTES`)."""
MIN_TOOL_RESULT_BUDGET_BYTES = 256
"""Smallest non-zero budget: room for the truncation marker plus some content (the original's trailer reserve)."""
CLEARED_PLACEHOLDER = "[Old tool result content cleared]"
"""Start of every micro-compacted tool result (the original's `CLEARED_PLACEHOLDER`)."""
HISTORY_SUMMARY_PREFIX = "[auto-compacted]"
"""Start of the message that replaces summarized history."""

CompactionKind = Literal["micro", "summary"]
SummarizeFn = Callable[[list[dict[str, Any]]], Awaitable[str]]
"""Summarize a slice of history into plain text (see `HistorySummarizer`)."""

_PREVIEW_CHARS = 160
_TRANSCRIPT_CLIP = 4000


# ---- result budget ----------------------------------------------------------------------


def _marker(dropped: int, middle: bool) -> str:
    where = " from the middle" if middle else ""
    text = (f"[… {dropped} bytes truncated{where} by tool_result_budget — you have not seen them; "
            "re-run with a narrower query to see the rest …]")
    return f"\n\n{text}\n\n" if middle else f"\n\n{text}"


def _head(data: bytes, size: int) -> bytes:
    cut = min(size, len(data))
    while cut < len(data) and cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1  # data[cut] continues a code point: step back to its lead byte
    return data[:cut]


def _tail(data: bytes, size: int) -> bytes:
    if size <= 0:
        return b""
    start = max(len(data) - size, 0)
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def truncate_result(text: str, max_bytes: int, *, tail_bytes: int = 0) -> tuple[str, bool]:
    """Cut `text` to at most `max_bytes` UTF-8 bytes, marker included; return (text, truncated).

    The cut never splits a code point. The marker says how many bytes were dropped and that the
    model has not seen them. `tail_bytes` > 0 also keeps up to that many bytes of the end (useful
    for logs whose errors come last); the marker then sits in the middle. `max_bytes <= 0`
    disables the budget.
    """
    if max_bytes <= 0:
        return text, False
    if max_bytes < MIN_TOOL_RESULT_BUDGET_BYTES:
        raise ValueError(f"max_bytes={max_bytes} leaves no room for the truncation marker; "
                         f"use 0 (no budget) or at least {MIN_TOOL_RESULT_BUDGET_BYTES}")
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, False
    middle = tail_bytes > 0
    # `dropped` is at most len(data), so this marker is at least as long as the final one.
    room = max_bytes - len(_marker(len(data), middle).encode())
    tail = _tail(data, min(tail_bytes, room // 2)) if middle else b""
    head = _head(data, room - len(tail))
    dropped = len(data) - len(head) - len(tail)
    decode: Callable[[bytes], str] = lambda raw: raw.decode("utf-8", "surrogatepass")  # noqa: E731
    return decode(head) + _marker(dropped, middle) + decode(tail), True


# ---- estimates and structure ------------------------------------------------------------


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def estimate_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Estimate prompt tokens: 4 per message plus ceil(chars / 4) of text, tool names and arguments.

    Chars/4 fits English and code; it under-counts CJK text (about one token per character), which
    the guard's thresholds leave room for. No tokenizer: the estimate must work for every model.
    """
    total = 0
    for message in messages:
        chars = len(_text_of(message.get("content"))) + len(str(message.get("tool_call_id") or ""))
        for call in message.get("tool_calls") or []:
            fn = (call.get("function") or {}) if isinstance(call, dict) else {}
            chars += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
        total += 4 + (chars + 3) // 4
    return total


def _head_end(messages: Sequence[dict[str, Any]]) -> int:
    """End of the head: the first assistant message or earlier summary after the system prompt."""
    for index in range(1, len(messages)):
        message = messages[index]
        if message.get("role") != "user" or _text_of(message.get("content")).startswith(HISTORY_SUMMARY_PREFIX):
            return index
    return len(messages)


def _recent_start(messages: Sequence[dict[str, Any]], keep_recent_turns: int) -> int:
    if keep_recent_turns < 1:
        raise ValueError(f"keep_recent_turns={keep_recent_turns}; keep at least the current turn (1)")
    starts = [i for i in range(1, len(messages)) if messages[i].get("role") == "assistant"]
    if len(starts) <= keep_recent_turns:
        return starts[0] if starts else len(messages)
    return starts[-keep_recent_turns]


def _call_names(messages: Sequence[dict[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                names[str(call.get("id") or "")] = str((call.get("function") or {}).get("name") or "")
    return names


def pairing_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """List what a provider would reject: tool results without their call, calls without results."""
    problems: list[str] = []
    open_ids: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_ids:
                open_ids.remove(call_id)
            else:
                problems.append(f"message {index}: tool result {call_id!r} answers no preceding call")
            continue
        if open_ids:
            problems.append(f"message {index}: calls {open_ids} have no results before it")
            open_ids = []
        if role == "assistant":
            open_ids = [str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    if open_ids:
        problems.append(f"end of history: calls {open_ids} have no results")
    return problems


# ---- results ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CompactionResult:
    """What one compaction did, ready to replace the history and to be recorded in the trace."""

    kind: CompactionKind
    """`micro` (old tool results cleared) or `summary` (middle replaced by one summary message)."""
    messages: list[dict[str, Any]]
    """The new history; kept messages are the very same dict objects as before."""
    tokens_before: int
    """`estimate_tokens` of the history handed in."""
    tokens_after: int
    """`estimate_tokens` of `messages`."""
    replaced_indices: tuple[int, ...] = ()
    """Indices (in the history handed in) of messages rewritten (micro) or summarized away (summary)."""
    replaced_call_ids: tuple[str, ...] = ()
    """Tool-call ids whose results were cleared or summarized away."""
    kept_recent: int = 0
    """Number of trailing messages kept byte-identical (the recent turns)."""
    summary: str | None = None
    """The summary text (summary only)."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the summary call, when the summarizer reports one (`last_usage`), for cost booking."""
    cost: float = 0.0
    """USD cost of the summary call, when the summarizer reports one (`last_cost`)."""

    @property
    def changed(self) -> bool:
        """True when the history was rewritten."""
        return bool(self.replaced_indices)

    def event_payload(self) -> dict[str, Any]:
        """JSON payload for a trace event of type `compaction` (and a message metadata marker)."""
        return {
            "kind": self.kind, "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
            "replaced_indices": list(self.replaced_indices), "replaced_call_ids": list(self.replaced_call_ids),
            "kept_recent": self.kept_recent, "summary_chars": len(self.summary) if self.summary else 0,
            "summary_cost": self.cost,
        }


def _placeholder(call_id: str, name: str, content: str) -> str:
    preview = " ".join(content[: _PREVIEW_CHARS * 2].split())[:_PREVIEW_CHARS]
    return (f"{CLEARED_PLACEHOLDER} tool={name or 'unknown'} call_id={call_id} original_chars={len(content)}; "
            f"preview: {preview}…")


def micro_compact(messages: Sequence[dict[str, Any]], *, keep_recent_turns: int, min_chars: int) -> CompactionResult:
    """Replace old tool results longer than `min_chars` by a placeholder keeping call id and a preview.

    Idempotent; the system prompt, the head and the last `keep_recent_turns` turns are untouched;
    every tool message stays in place, so call/result pairing is unchanged.
    """
    boundary = _recent_start(messages, keep_recent_turns)
    names = _call_names(messages)
    out = list(messages)
    indices: list[int] = []
    call_ids: list[str] = []
    for index in range(1, boundary):
        message = messages[index]
        content = message.get("content")
        if message.get("role") != "tool" or not isinstance(content, str) or len(content) <= min_chars:
            continue
        if content.startswith(CLEARED_PLACEHOLDER):
            continue
        call_id = str(message.get("tool_call_id") or "")
        replacement = _placeholder(call_id, names.get(call_id, ""), content)
        if len(replacement) >= len(content):
            continue
        out[index] = {**message, "content": replacement}
        indices.append(index)
        call_ids.append(call_id)
    return CompactionResult(
        kind="micro", messages=out, tokens_before=estimate_tokens(messages), tokens_after=estimate_tokens(out),
        replaced_indices=tuple(indices), replaced_call_ids=tuple(call_ids), kept_recent=len(messages) - boundary,
    )


async def summary_compact(
    messages: Sequence[dict[str, Any]], *, summarize: SummarizeFn, keep_recent_turns: int
) -> CompactionResult:
    """Replace the middle (after the head, before the recent turns) with one summary user message.

    The summary message is a user message starting with `[auto-compacted]`: a mid-history system
    message would be hoisted into the system prompt by Anthropic and rejected by some local
    templates. A failing or empty `summarize` raises; the history is then left as it was.
    """
    head_end = _head_end(messages)
    boundary = _recent_start(messages, keep_recent_turns)
    before = estimate_tokens(messages)
    if boundary <= head_end:
        return CompactionResult(kind="summary", messages=list(messages), tokens_before=before, tokens_after=before,
                                kept_recent=len(messages) - boundary)
    middle = list(messages[head_end:boundary])
    summary = await summarize(middle)
    if not isinstance(summary, str) or not summary.strip():
        raise LLMError("the history summarizer returned an empty summary; the history was left unchanged")
    note = {"role": "user", "content": f"{HISTORY_SUMMARY_PREFIX} Summary of {len(middle)} earlier messages:\n\n{summary.strip()}"}
    out = [*messages[:head_end], note, *messages[boundary:]]
    call_ids = [str(m.get("tool_call_id") or "") for m in middle if m.get("role") == "tool"]
    usage, cost = getattr(summarize, "last_usage", None), getattr(summarize, "last_cost", 0.0)
    return CompactionResult(
        kind="summary", messages=out, tokens_before=before, tokens_after=estimate_tokens(out),
        replaced_indices=tuple(range(head_end, boundary)), replaced_call_ids=tuple(call_ids),
        kept_recent=len(messages) - boundary, summary=summary.strip(),
        usage=usage if isinstance(usage, Usage) else Usage(), cost=cost if isinstance(cost, float) else 0.0,
    )


# ---- summarizing history with a model ----------------------------------------------------

HISTORY_SUMMARY_PROMPT = (
    "You compress the earlier part of an agent's conversation so the agent can continue without it.\n"
    "Keep: the goal and constraints, decisions taken and why, every identifier (file paths, ids, names, "
    "URLs), every number and result that later steps may need, errors met and how they were handled, and "
    "what is still open. Drop chit-chat and repeated content. Never invent anything.\n"
    "Answer with the summary only, as short factual bullet points."
)


def render_transcript(messages: Sequence[dict[str, Any]], *, clip: int = _TRANSCRIPT_CLIP) -> str:
    """Render history as numbered lines (`[i] role: text`, tool calls and results), each clipped."""
    lines: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        text = _text_of(message.get("content"))
        text = text if len(text) <= clip else text[:clip] + f" …[{len(text) - clip} more chars]"
        if role == "tool":
            lines.append(f"[{index}] tool_result({message.get('tool_call_id')}): {text}")
            continue
        if text:
            lines.append(f"[{index}] {role}: {text}")
        for call in message.get("tool_calls") or []:
            fn = (call.get("function") or {}) if isinstance(call, dict) else {}
            args = str(fn.get("arguments") or "")
            args = args if len(args) <= clip else args[:clip] + "…"
            lines.append(f"[{index}] assistant tool_call: {fn.get('name')}({args})")
    return "\n".join(lines)


class HistorySummarizer:
    """A `SummarizeFn` backed by a model: one call, fixed prompt, temperature 0.2 (as the original)."""

    def __init__(self, llm: LLMCall, model: str, *, temperature: float = 0.2) -> None:
        self.llm = llm
        self.model = model
        self.temperature = temperature
        self.last_usage: Usage | None = None
        """Usage of the latest call (read by `summary_compact` into `CompactionResult.usage`)."""
        self.last_cost: float = 0.0
        """USD cost of the latest call."""

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        """Summarize `messages`; raise LLMError when the model answers with nothing."""
        request = [
            {"role": "system", "content": HISTORY_SUMMARY_PROMPT},
            {"role": "user", "content": f"--- BEGIN HISTORY ---\n{render_transcript(messages)}\n--- END HISTORY ---"},
        ]
        self.last_usage, self.last_cost = None, 0.0
        response = LLMResponse.coerce(await self.llm(request, self.model, None, self.temperature))
        self.last_usage, self.last_cost = response.usage, response.cost
        if not response.content.strip():
            raise LLMError(f"history summarizer model {self.model!r} returned an empty summary")
        return response.content


# ---- the guard --------------------------------------------------------------------------


class ContextGuard:
    """Decide before each provider call whether the history must shrink, and shrink it.

    At `micro_threshold` of the window, old tool results are cleared (`micro_compact`); if the
    history is still at `summary_threshold` or above, the middle is summarized
    (`summary_compact`). `max_consecutive_failures` failed summaries in a row disable summarizing
    for the rest of the run; one success re-arms it.
    """

    def __init__(
        self,
        context_window: int,
        micro_threshold: float = 0.7,
        summary_threshold: float = 0.85,
        *,
        keep_recent_turns: int = 3,
        micro_min_chars: int = 2000,
        max_consecutive_failures: int = 3,
    ) -> None:
        if not 0 < micro_threshold <= summary_threshold:
            raise ValueError(f"thresholds must satisfy 0 < micro ({micro_threshold}) <= summary ({summary_threshold})")
        if keep_recent_turns < 1 or max_consecutive_failures < 1:
            raise ValueError("keep_recent_turns and max_consecutive_failures must be at least 1")
        self.context_window = context_window
        self.micro_threshold = micro_threshold
        self.summary_threshold = summary_threshold
        self.keep_recent_turns = keep_recent_turns
        self.micro_min_chars = micro_min_chars
        self.max_consecutive_failures = max_consecutive_failures
        self.failures = 0
        """Consecutive failed summaries."""
        self.last_error: str | None = None
        """Why the latest summary failed (None after a success)."""

    @property
    def summary_disabled(self) -> bool:
        """True once `max_consecutive_failures` summaries failed in a row."""
        return self.failures >= self.max_consecutive_failures

    def utilization(self, messages: Sequence[dict[str, Any]], scale: float = 1.0) -> float:
        """Estimated share of the context window the history fills (0.0 when the window is unknown).

        `scale` corrects the chars/4 estimate by what the provider reported for this history.
        """
        return estimate_tokens(messages) * scale / self.context_window if self.context_window > 0 else 0.0

    async def guard(
        self, messages: Sequence[dict[str, Any]], summarize: SummarizeFn | None = None, *, tokens: int | None = None
    ) -> CompactionResult | None:
        """Return the compaction to apply before the next call, or None when the history may go as is.

        `tokens` is the caller's better figure for `messages` (the provider's reported prompt tokens
        plus an estimate of what was appended since); above the chars/4 estimate, it scales every
        estimate of this guard step, so CJK text or a heavy tool addendum trips the thresholds.
        """
        estimated = estimate_tokens(messages)
        scale = tokens / estimated if tokens is not None and estimated and tokens > estimated else 1.0
        if self.utilization(messages, scale) < self.micro_threshold:
            return None
        before = estimate_tokens(messages)
        micro = micro_compact(messages, keep_recent_turns=self.keep_recent_turns, min_chars=self.micro_min_chars)
        current = micro.messages
        if self.utilization(current, scale) < self.summary_threshold or summarize is None or self.summary_disabled:
            return micro if micro.changed else None
        try:
            summary = await summary_compact(current, summarize=summarize, keep_recent_turns=self.keep_recent_turns)
        except Exception as exc:  # noqa: BLE001 — any summarizer failure falls back; CancelledError is not caught
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return micro if micro.changed else None
        self.failures, self.last_error = 0, None
        if not summary.changed:
            return micro if micro.changed else None
        cleared = sorted(set(micro.replaced_call_ids) | set(summary.replaced_call_ids))
        return CompactionResult(
            kind="summary", messages=summary.messages, tokens_before=before, tokens_after=summary.tokens_after,
            replaced_indices=summary.replaced_indices, replaced_call_ids=tuple(cleared),
            kept_recent=summary.kept_recent, summary=summary.summary, usage=summary.usage, cost=summary.cost,
        )

