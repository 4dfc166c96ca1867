"""Tool-call dialects (SPEC H3): native `tool_calls`, `<tool_call>` JSON in text, and P-format.

The runner always keeps its history in OpenAI format with structured `tool_calls`. A dialect
translates at the edge: `prepare` turns that history (and the tool schemas) into what the model
understands, `parse` turns the model's answer back into structured calls. `DialectLLM` wraps any
`LLMCall` with a dialect, so the loop never knows which one is in use.

Text dialects teach the format in an addendum appended to the system message. The addendum is a
pure function of the tool set (sorted by name, schemas dumped with sorted keys), so the system
prompt is byte-identical on every call (H2). Parsers never raise: a call that cannot be read
becomes a `ToolCall` with `parse_error` set, which the runner returns to the model.

This module holds the public API; the text parsing lives in `dialect_parsing.py` (tags, fences,
tolerant JSON) and `dialect_pformat.py` (the positional P-format).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.dialect_parsing import (
    _OPEN,
    _fill_ids,
    _Found,
    _json_body,
    _safe_extract,
    _strip_fence,
    _to_tool_calls,
)
from cyber_agent.llm.dialect_pformat import (
    _pf_type,
    _pformat_call,
    _pformat_render,
    _tool_map,
)
from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse

__all__ = [
    "DialectLLM",
    "DialectName",
    "NativeDialect",
    "PFormatDialect",
    "ToolDialect",
    "XmlDialect",
    "choose_dialect",
]

DialectName = Literal["native", "xml", "pformat"]


# ---- dialects ---------------------------------------------------------------------------


class ToolDialect(ABC):
    """How tools are offered to a model and how its calls are read back."""

    name: ClassVar[DialectName]
    id_prefix: ClassVar[str]
    """Prefix of the deterministic ids given to parsed calls: `{prefix}_{turn}_{index}`."""

    @abstractmethod
    def prepare(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """Return (messages for the provider, tools for the provider or None)."""

    @abstractmethod
    def parse(self, response: LLMResponse, *, tools: Sequence[dict[str, Any]] | None = None, turn: int = 0) -> LLMResponse:
        """Return the response with calls in `tool_calls` and call text removed from `content`."""


class NativeDialect(ToolDialect):
    """Structured `tool_calls` (OpenAI, Anthropic): history and tools pass through unchanged.

    When a reply has no structured calls but holds `<tool_call>` tags, they are parsed as calls
    (as the original does); set `text_fallback=False` to turn that off.
    """

    name = "native"
    id_prefix = "call"

    def __init__(self, *, text_fallback: bool = True) -> None:
        self.text_fallback = text_fallback

    def prepare(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """Pass messages and tools through."""
        return list(messages), (list(tools) if tools else None)

    def parse(self, response: LLMResponse, *, tools: Sequence[dict[str, Any]] | None = None, turn: int = 0) -> LLMResponse:
        """Keep structured calls (filling missing ids); else read `<tool_call>` tags from the text."""
        if response.tool_calls or not self.text_fallback or not response.content:
            return _fill_ids(response, self.id_prefix, turn)
        if _OPEN.search(response.content) is None and "```" not in response.content:
            return response
        text, found = _safe_extract(response.content, _json_body, whole_reply=False)
        if not found:
            return response
        return response.model_copy(update={"content": text, "tool_calls": _to_tool_calls(found, self.id_prefix, turn)})


class _TextDialect(ToolDialect):
    """Shared machinery of the text dialects: system addendum, history rendering, tag parsing."""

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:  # pragma: no cover - abstract
        """Return the system-prompt addendum teaching the format and listing the tools."""
        raise NotImplementedError

    def render_call(self, name: str, arguments: Any, tools: dict[str, dict[str, Any]]) -> str:
        """Return the tag body for one prior call in this dialect."""
        body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        return body.replace("</", "<\\/")  # a string value can never close the tag early

    def parse_body(self, body: str, tools: dict[str, dict[str, Any]]) -> list[_Found]:
        """Read the calls inside one tag."""
        return _json_body(body)

    def prepare(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """Render prior calls and results as text; append the tool addendum to the system message."""
        tool_list = sorted((t for t in tools or [] if isinstance(t, dict)), key=lambda t: str((t.get("function") or t).get("name")))
        by_name = _tool_map(tool_list)
        names: dict[str, str] = {}
        out: list[dict[str, Any]] = []
        results: list[str] = []
        for message in messages:
            if message.get("role") == "tool":
                results.append(_render_result(message, names))
                continue
            if results:
                out.append({"role": "user", "content": "[Tool results]\n" + "\n".join(results)})
                results = []
            if message.get("role") == "assistant" and message.get("tool_calls"):
                out.append(self._render_assistant(message, by_name, names))
            else:
                out.append(message)
        if results:
            out.append({"role": "user", "content": "[Tool results]\n" + "\n".join(results)})
        if tool_list:
            addendum = self.instructions(tool_list)
            if out and out[0].get("role") == "system":
                first = out[0]
                content = first.get("content")
                if isinstance(content, list):
                    out[0] = {**first, "content": [*content, {"type": "text", "text": addendum}]}
                else:
                    out[0] = {**first, "content": f"{content or ''}\n\n{addendum}" if content else addendum}
            else:
                out.insert(0, {"role": "system", "content": addendum})
        return out, None

    def _render_assistant(self, message: dict[str, Any], tools: dict[str, dict[str, Any]], names: dict[str, str]) -> dict[str, Any]:
        parts = [message["content"]] if isinstance(message.get("content"), str) and message["content"] else []
        for call in message.get("tool_calls") or []:
            fn = (call.get("function") or {}) if isinstance(call, dict) else {}
            name = str(fn.get("name") or "")
            names[str(call.get("id") or "")] = name
            parts.append(f"<tool_call>\n{self.render_call(name, _stored_arguments(fn.get('arguments')), tools)}\n</tool_call>")
        return {"role": "assistant", "content": "\n".join(parts)}

    def parse(self, response: LLMResponse, *, tools: Sequence[dict[str, Any]] | None = None, turn: int = 0) -> LLMResponse:
        """Read calls from the text; structured calls, if a server sent some anyway, win."""
        if response.tool_calls:
            return _fill_ids(response, self.id_prefix, turn)
        by_name = _tool_map(tools)
        text, found = _safe_extract(response.content or "", lambda body: self.parse_body(body, by_name), whole_reply=True)
        if not found:
            return response
        return response.model_copy(update={"content": text, "tool_calls": _to_tool_calls(found, self.id_prefix, turn)})


def _stored_arguments(raw: Any) -> Any:
    """Arguments of a stored call: the object, or the raw text of a call that never parsed."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    return value if isinstance(value, dict) else raw


def _render_result(message: dict[str, Any], names: dict[str, str]) -> str:
    call_id = str(message.get("tool_call_id") or "")
    name = str(message.get("name") or names.get(call_id) or "unknown")
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    attr: Callable[[str], str] = lambda v: v.replace("&", "&amp;").replace('"', "&quot;")  # noqa: E731
    return f'<tool_result id="{attr(call_id)}" name="{attr(name)}">\n{content or ""}\n</tool_result>'


def _schema_line(tool: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    fn = tool.get("function") or tool
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    return str(fn.get("name")), str(fn.get("description") or "").strip(), params


class XmlDialect(_TextDialect):
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` in the reply text."""

    name = "xml"
    id_prefix = "xml"

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        """Return the protocol block and the tool list with JSON-schema parameters."""
        lines = [
            "## Tool use protocol",
            "To call a tool, write a JSON object between <tool_call> and </tool_call> in your reply:",
            "<tool_call>",
            '{"name": "TOOL_NAME", "arguments": {"PARAM": "VALUE"}}',
            "</tool_call>",
            "- One call per tag; write several tags to call several tools, in the order they should run.",
            '- "arguments" is a JSON object matching the tool\'s parameters (double quotes, no comments).',
            "- After your calls, stop: the results come back in a user message starting with [Tool results],"
            " one <tool_result> block per call.",
            "- When the task is done, answer in plain text without any <tool_call> tag.",
            "",
            "## Available tools",
        ]
        for tool in tools:
            name, description, params = _schema_line(tool)
            lines += [f"### {name}", description, "Parameters: " + json.dumps(params, sort_keys=True, ensure_ascii=False), ""]
        return "\n".join(lines).rstrip()


class PFormatDialect(_TextDialect):
    """The compact positional format for small models: `<tool_call>name[v1|v2]</tool_call>`.

    Values are positional in the alphabetical order of the tool's parameter names; `\\|`, `\\]`
    and `\\\\` escape; values are coerced to the schema's integer/number/boolean types. JSON in
    the tag is accepted too (for nested arguments); prior calls are rendered back as P-format
    whenever that parses back to the same call, else as JSON.
    """

    name = "pformat"
    id_prefix = "pf"

    def instructions(self, tools: Sequence[dict[str, Any]]) -> str:
        """Return the protocol rules and one `Call as:` line per tool."""
        lines = [
            "## Tool use protocol",
            "Call a tool by writing <tool_call>name[value1|value2]</tool_call> in your reply.",
            "- Values are positional, in the order shown by \"Call as\" for each tool.",
            "- Escape a literal | as \\|, a literal ] as \\] and a backslash as \\\\.",
            "- Leave out trailing values you do not need: name[a]; name[] when there are none.",
            "- Several tags are allowed; they run in order.",
            '- For nested values write JSON instead: <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>',
            "- Results come back in a user message starting with [Tool results].",
            "- When the task is done, answer in plain text without any <tool_call> tag.",
            "",
            "## Tools",
        ]
        for tool in tools:
            name, description, params = _schema_line(tool)
            props = params.get("properties") or {}
            required = set(params.get("required") or [])
            order = sorted(props)
            lines += [f"- **{name}**: {description}", f"  Call as: `{name}[{'|'.join(order)}]`"]
            if order:
                described = [f"{k} ({_pf_type(props[k]) or 'text'}{', required' if k in required else ''})" for k in order]
                lines.append("  Values: " + ", ".join(described))
        return "\n".join(lines)

    def render_call(self, name: str, arguments: Any, tools: dict[str, dict[str, Any]]) -> str:
        """Render as P-format when it round-trips, else as JSON."""
        if isinstance(arguments, dict):
            text = _pformat_render(name, arguments, tools)
            if text is not None:
                return text
        return super().render_call(name, arguments, tools)

    def parse_body(self, body: str, tools: dict[str, dict[str, Any]]) -> list[_Found]:
        """P-format first; JSON when the body is not P-format; the P-format error when neither parses."""
        cleaned = _strip_fence(body)
        pformat = _pformat_call(cleaned, tools)
        if pformat is not None and pformat.error is None:
            return [pformat]
        found = _json_body(cleaned)
        if pformat is not None and all(f.error for f in found):
            return [pformat]
        return found


# ---- wiring -----------------------------------------------------------------------------


def _next_turn(messages: Sequence[dict[str, Any]], prefix: str) -> int:
    """Turn number for new call ids: after every assistant message and every id already used."""
    pattern = re.compile(rf"{re.escape(prefix)}_(\d+)_\d+")
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    for message in messages:
        for call in message.get("tool_calls") or []:
            match = pattern.fullmatch(str(call.get("id") or "")) if isinstance(call, dict) else None
            if match:
                turn = max(turn, int(match.group(1)) + 1)
    return turn


class DialectLLM:
    """An `LLMCall` that speaks `dialect` to `inner` and structured tool calls to the runner."""

    def __init__(self, inner: LLMCall, dialect: ToolDialect) -> None:
        self.inner = inner
        self.dialect = dialect

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        model: str,
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        *,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Prepare the request for the dialect, call the model, parse its calls."""
        provider_messages, provider_tools = self.dialect.prepare(messages, tools)
        raw = await self.inner(provider_messages, model, provider_tools, temperature, on_delta=on_delta)
        turn = _next_turn(messages, self.dialect.id_prefix)
        return self.dialect.parse(LLMResponse.coerce(raw), tools=tools, turn=turn)


_NATIVE_PROVIDERS = frozenset({"openai", "anthropic", "demo", "replay", "fallible"})
_SMALL_MODEL_MAX_BILLIONS = 4.0
_SIZE = re.compile(r"(?<![\d.x])(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)
_SMALL_HINTS = ("tiny", "smollm", "nano")
_NATIVE_HINTS = (
    "qwen2.5", "qwen3", "llama3.1", "llama3.2", "llama3.3", "llama4", "mistral-nemo", "mistral-small",
    "mistral-large", "mixtral", "command-r", "hermes", "firefunction", "functionary", "gpt-oss", "granite3",
    "granite-3", "glm-4", "gpt-4", "gpt-3.5", "claude", "gemini",
)


def _is_small(model: str) -> bool:
    size = _SIZE.search(model)
    billions = None if size is None else float(size.group(1)) / (1000 if size.group(2).lower() == "m" else 1)
    return (billions is not None and billions <= _SMALL_MODEL_MAX_BILLIONS) or any(h in model for h in _SMALL_HINTS)


def choose_dialect(provider: str, model: str, override: str | None = None) -> ToolDialect:
    """Pick the dialect for a provider and model name.

    1. `override` ("native", "xml", "pformat") wins; None or "auto" applies the rule.
    2. openai / anthropic / demo / fallible / replay speak native tool calls, except an `openai` model named
       like a local one (`name:tag` as Ollama writes it, or `.gguf`), which falls to rule 3.
    3. Local or unknown providers: a small model (≤ 4B parameters by its name, or named tiny /
       smollm / nano) gets P-format; a model family known to support tools gets native; any
       other model gets XML.
    """
    choice = (override or "auto").strip().lower()
    if choice not in ("auto", "native", "xml", "pformat"):
        raise ConfigurationError("tool_dialect", f"unknown dialect {override!r}; use auto, native, xml or pformat")
    dialects: dict[str, type[ToolDialect]] = {"native": NativeDialect, "xml": XmlDialect, "pformat": PFormatDialect}
    if choice != "auto":
        return dialects[choice]()
    provider, name = provider.strip().lower(), model.strip().lower()
    local_looking = (":" in name and not name.startswith("ft:")) or name.endswith(".gguf")
    if provider in _NATIVE_PROVIDERS and not (provider == "openai" and local_looking):
        return NativeDialect()
    if _is_small(name):
        return PFormatDialect()
    if any(hint in name for hint in _NATIVE_HINTS):
        return NativeDialect()
    return XmlDialect()
