"""Tool-call dialects (SPEC H3): native `tool_calls`, `<tool_call>` JSON in text, and P-format.

The runner always keeps its history in OpenAI format with structured `tool_calls`. A dialect
translates at the edge: `prepare` turns that history (and the tool schemas) into what the model
understands, `parse` turns the model's answer back into structured calls. `DialectLLM` wraps any
`LLMCall` with a dialect, so the loop never knows which one is in use.

Text dialects teach the format in an addendum appended to the system message. The addendum is a
pure function of the tool set (sorted by name, schemas dumped with sorted keys), so the system
prompt is byte-identical on every call (H2). Parsers never raise: a call that cannot be read
becomes a `ToolCall` with `parse_error` set, which the runner returns to the model.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from cyber_agent.errors import ConfigurationError
from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.types import DeltaCallback, LLMCall, LLMResponse, ToolCall

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

_TAGS = "tool_call|toolcall|tool-call|invoke"
_OPEN = re.compile(rf"<(?:{_TAGS})>", re.IGNORECASE)
_CLOSE = re.compile(rf"</(?:{_TAGS})>", re.IGNORECASE)
_FENCE_CALL = re.compile(rf"```(?:{_TAGS})[ \t]*\n(.*?)(?:```|</(?:{_TAGS})>|\Z)", re.IGNORECASE | re.DOTALL)
_NAME_GUESS = re.compile(r"""["']name["']\s*:\s*["']([^"'\\]{1,200})["']""")
_STRAY_CLOSE = re.compile(rf"\s*(?:```)?\s*</(?:{_TAGS})>", re.IGNORECASE)
_PF_HEAD = re.compile(r"(\w+)\[")
_DECODER = json.JSONDecoder(strict=False)  # tolerate raw newlines inside strings
_MAX_TAGS = 64  # bounds the work on adversarial text; real replies hold a handful of calls
_MAX_STARTS = 32
_FAILED = object()


# ---- tolerant JSON ----------------------------------------------------------------------


def _repair(text: str) -> str:
    """Rewrite JSON-ish text: single-quoted strings, trailing commas, Python True/False/None."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif ch == "'":
            j, buf = i + 1, []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n:
                    buf.append("'" if text[j + 1] == "'" else text[j:j + 2])
                    j += 2
                    continue
                buf.append('\\"' if text[j] == '"' else text[j])
                j += 1
            out.append('"' + "".join(buf) + '"')
            i = j + 1
        elif ch == ",":
            k = i + 1
            while k < n and text[k] in " \t\r\n":
                k += 1
            if not (k < n and text[k] in "}]"):
                out.append(ch)
            i += 1
        elif ch.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append({"True": "true", "False": "false", "None": "null"}.get(word, word))
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _loads(text: str) -> Any:
    """Parse JSON, then the repaired text; return `_FAILED` instead of raising."""
    for candidate in (text, None):
        try:
            return _DECODER.decode(candidate if candidate is not None else _repair(text))
        except (ValueError, RecursionError, MemoryError):
            continue
    return _FAILED


def _brackets(text: str, start: int) -> tuple[int | None, str]:
    """Scan from the bracket at `start`, string-aware: (index after its closing bracket or None, missing closers)."""
    stack: list[str] = []
    quote, i = "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
            if not stack:
                return i + 1, ""
        i += 1
    return None, quote + "".join(reversed(stack))


def _strip_fence(body: str) -> str:
    body = body.strip()
    if body.startswith("```"):
        newline = body.find("\n")
        body = body[newline + 1:] if newline >= 0 else ""
    if body.endswith("```"):
        body = body[:-3]
    return body.strip()


def _json_values(body: str) -> list[Any]:
    """The whole body as one JSON value, else the top-level JSON values found in it.

    A bracketed span that fails to parse is skipped whole: a call nested inside broken arguments
    must never run on its own.
    """
    whole = _loads(body)
    if whole is not _FAILED:
        return [whole]
    values: list[Any] = []
    i = attempts = 0
    while attempts < _MAX_STARTS:
        starts = [p for p in (body.find("{", i), body.find("[", i)) if p >= 0]
        if not starts:
            break
        start, attempts = min(starts), attempts + 1
        end, missing = _brackets(body, start)
        if end is None:  # cut off mid-JSON: close it and stop, whatever the outcome
            cut = body[start:] if missing[:1] in ("'", '"') else body[start:].rstrip().rstrip(",")
            value = _loads(cut + missing)
            if value is not _FAILED:
                values.append(value)
            break
        value = _loads(body[start:end])
        if value is not _FAILED:
            values.append(value)
        i = end
    return values


# ---- extracted calls --------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    name: str
    arguments: Any = None
    error: str | None = None
    raw: str | None = None


def _call_from_object(obj: Any, raw: str) -> _Found:
    if not isinstance(obj, dict):
        return _Found("", error=f"expected a JSON object with name and arguments, got {type(obj).__name__}", raw=raw)
    fn = obj["function"] if isinstance(obj.get("function"), dict) else obj
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        return _Found("", error='the call has no "name"; write {"name": "TOOL", "arguments": {...}}', raw=raw)
    args = next((fn[k] for k in ("arguments", "parameters", "args") if k in fn), None)
    if args is not None and not isinstance(args, (dict, str)):
        return _Found(name.strip(), error=f'"arguments" must be a JSON object, got {type(args).__name__}', raw=raw)
    return _Found(name.strip(), arguments=args)


def _calls_from_value(value: Any, raw: str) -> list[_Found]:
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    return [_call_from_object(item, raw) for item in items]


def _is_call_shape(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    return isinstance(fn.get("name"), str) and bool(fn["name"].strip()) and any(
        k in fn for k in ("arguments", "parameters"))


def _whole_reply_calls(text: str) -> tuple[str, list[_Found]] | None:
    """Stage 1: the trimmed reply is itself JSON shaped like tool calls (strict shapes only)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    value = _loads(stripped)
    items = value.get("tool_calls") if isinstance(value, dict) and "tool_calls" in value else value
    items = items if isinstance(items, list) else [items]
    if not items or not all(_is_call_shape(item) for item in items):
        return None
    content = value.get("content") if isinstance(value, dict) else None
    return (content if isinstance(content, str) else ""), [_call_from_object(item, stripped) for item in items]


_BodyParser = Callable[[str], list[_Found]]


def _unclosed_extent(text: str, start: int) -> int | None:
    """End of the call after an unclosed tag, or None when what follows does not look like a call."""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    if text.startswith("```", i):
        newline = text.find("\n", i)
        i = len(text) if newline < 0 else newline + 1
        while i < len(text) and text[i].isspace():
            i += 1
    if i < len(text) and text[i] in "{[":
        return _brackets(text, i)[0] or len(text)
    head = _PF_HEAD.match(text, i)
    if head:
        close = _pf_close(text, head.end())
        return len(text) if close is None else close + 1
    return None


def _scan(text: str, parse_body: _BodyParser) -> tuple[str, list[_Found]]:
    """Stages 2 and 3: `<tool_call>` tags (closed or not), then ```tool_call fences."""
    narrative: list[str] = []
    found: list[_Found] = []
    pos = tags = 0
    while (opened := _OPEN.search(text, pos)) is not None:
        if tags == _MAX_TAGS:
            found.append(_Found("", raw="", error=f"more than {_MAX_TAGS} tool calls in one reply; the rest were ignored"))
            break
        tags += 1
        narrative.append(text[pos:opened.start()])
        after = opened.end()
        json_end = _unclosed_extent(text, after)
        closed = _CLOSE.search(text, json_end if json_end and text[json_end - 1] in "}]" else after)
        following = _OPEN.search(text, after)
        if closed is not None and (following is None or closed.start() < following.start()
                                   or (json_end is not None and following.start() < json_end)):
            found += parse_body(text[after:closed.start()])
            pos = closed.end()
            continue
        if json_end is None:  # prose that mentions the tag: keep it as text
            narrative.append(opened.group(0))
            pos = after
            continue
        found += parse_body(text[after:json_end])
        pos = json_end
        stray = _STRAY_CLOSE.match(text, pos)
        pos = stray.end() if stray else pos
    narrative.append(text[pos:])
    if not found:
        rest = "".join(narrative)
        for match in _FENCE_CALL.finditer(rest):
            found += parse_body(match.group(1))
        if found:
            narrative = [_FENCE_CALL.sub("", rest)]
    return re.sub(r"\n{3,}", "\n\n", "".join(narrative)).strip(), found


def _json_body(body: str) -> list[_Found]:
    cleaned = _strip_fence(body)
    found = [f for value in _json_values(cleaned) for f in _calls_from_value(value, cleaned)]
    if found:
        return found
    guess = _NAME_GUESS.search(cleaned)
    return [_Found(guess.group(1).strip() if guess else "", raw=cleaned, error=(
        'the tool call is not valid JSON; write <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>'))]


# ---- P-format ---------------------------------------------------------------------------


def _pf_close(text: str, start: int) -> int | None:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "]":
            return i
        i += 1
    return None


def _pf_split(inner: str) -> list[str]:
    values, buf, i = [], [], 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\" and i + 1 < len(inner) and inner[i + 1] in "|]\\":
            buf.append(inner[i + 1])
            i += 2
            continue
        if ch == "|":
            values.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    values.append("".join(buf))
    return values


def _pf_type(prop: Any) -> str:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else ""


def _pf_coerce(value: str, prop: Any) -> Any:
    kind, trimmed = _pf_type(prop), value.strip()
    if kind == "integer" and re.fullmatch(r"[+-]?\d{1,18}", trimmed):
        return int(trimmed)
    if kind == "number" and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?", trimmed):
        number = float(trimmed)
        return number if number not in (float("inf"), float("-inf")) else value
    if kind == "boolean" and trimmed.lower() in ("true", "yes", "1", "false", "no", "0"):
        return trimmed.lower() in ("true", "yes", "1")
    return value


def _properties(tool: dict[str, Any]) -> dict[str, Any]:
    props = ((tool.get("function") or tool).get("parameters") or {}).get("properties") or {}
    return props if isinstance(props, dict) else {}


def _tool_map(tools: Sequence[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool in tools or []:
        fn = (tool.get("function") or tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = tool
    return out


def _pformat_call(body: str, tools: dict[str, dict[str, Any]]) -> _Found | None:
    """Parse `name[v1|v2]`; None when the body is not P-format at all."""
    body = body.strip()
    head = _PF_HEAD.match(body)
    if head is None:
        return None
    close = _pf_close(body, head.end())
    if close != len(body) - 1:
        return None
    name, inner = head.group(1), body[head.end():close]
    if name not in tools:
        known = ", ".join(sorted(tools)) or "none"
        return _Found(name, raw=body, error=f"unknown tool {name!r}; available tools: {known}")
    props = _properties(tools[name])
    order = sorted(props)
    values = _pf_split(inner) if inner else []
    if len(values) > len(order):
        signature = "|".join(order)
        return _Found(name, raw=body, error=f"{name} takes at most {len(order)} values ({name}[{signature}]), "
                                            f"got {len(values)}; escape a literal | as \\|")
    return _Found(name, arguments={key: _pf_coerce(v, props[key]) for key, v in zip(order, values)})


def _pformat_render(name: str, args: dict[str, Any], tools: dict[str, dict[str, Any]]) -> str | None:
    """Render a call as P-format, or None when that would not parse back to the same call."""
    if name not in tools or not _PF_HEAD.fullmatch(name + "["):
        return None
    order = sorted(_properties(tools[name]))
    if set(args) - set(order):
        return None
    present = [key in args for key in order]
    count = max((i + 1 for i, p in enumerate(present) if p), default=0)
    if not all(present[:count]):
        return None
    values = []
    for key in order[:count]:
        value = args[key]
        if isinstance(value, bool):
            values.append("true" if value else "false")
        elif isinstance(value, (int, float)):
            values.append(json.dumps(value))
        elif isinstance(value, str):
            values.append(value.replace("\\", "\\\\").replace("|", "\\|").replace("]", "\\]"))
        else:
            return None
    text = f"{name}[{'|'.join(values)}]"
    parsed = _pformat_call(text, tools)
    if parsed is None or parsed.error or _OPEN.search(text) or _CLOSE.search(text):
        return None
    if json.dumps(parsed.arguments, sort_keys=True) != json.dumps(args, sort_keys=True):
        return None  # stricter than ==, which takes 1 for True and 1 for 1.0
    return text


# ---- dialects ---------------------------------------------------------------------------


def _to_tool_calls(found: list[_Found], prefix: str, turn: int) -> list[ToolCall]:
    calls = []
    for index, item in enumerate(found):
        call_id = f"{prefix}_{turn}_{index}"
        if item.error is not None:
            calls.append(ToolCall(id=call_id, name=item.name, raw_arguments=item.raw or "", parse_error=item.error))
        else:
            calls.append(parse_tool_arguments(call_id, item.name, item.arguments))
    return calls


def _fill_ids(response: LLMResponse, prefix: str, turn: int) -> LLMResponse:
    if all(call.id for call in response.tool_calls):
        return response
    calls = [c if c.id else c.model_copy(update={"id": f"{prefix}_{turn}_{i}"}) for i, c in enumerate(response.tool_calls)]
    return response.model_copy(update={"tool_calls": calls})


def _safe_extract(text: str, parse_body: _BodyParser, whole_reply: bool) -> tuple[str, list[_Found]]:
    try:
        if whole_reply:
            whole = _whole_reply_calls(text)
            if whole is not None:
                return whole
        return _scan(text, parse_body)
    except Exception as exc:  # noqa: BLE001 — the parser's contract is to never raise
        if _OPEN.search(text) is None:
            return text, []
        return text, [_Found("", raw=text[:2000], error=f"the tool calls could not be read ({type(exc).__name__})")]


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
    attr = lambda v: v.replace("&", "&amp;").replace('"', "&quot;")  # noqa: E731
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


_NATIVE_PROVIDERS = frozenset({"openai", "anthropic", "demo", "replay"})
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
    2. openai / anthropic / demo / replay speak native tool calls, except an `openai` model named
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
