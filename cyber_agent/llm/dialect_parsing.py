"""Reading tool calls out of model text, for the text dialects of `cyber_agent.llm.dialects`.

Tolerant JSON (repairs single quotes, trailing commas, Python literals and cut-off values), the
`<tool_call>` tag and fence scanner, and the step from found calls to `ToolCall`s with
deterministic ids. Nothing here raises on model text: `_safe_extract` is the entry point.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cyber_agent.llm.toolcall_json import parse_tool_arguments
from cyber_agent.llm.types import LLMResponse, ToolCall

__all__: list[str] = []

_TAGS = "tool_call|toolcall|tool-call|invoke"
_OPEN = re.compile(rf"<(?:{_TAGS})>", re.IGNORECASE)
_CLOSE = re.compile(rf"</(?:{_TAGS})>", re.IGNORECASE)
_FENCE_CALL = re.compile(rf"```(?:{_TAGS})[ \t]*\n(.*?)(?:```|</(?:{_TAGS})>|\Z)", re.IGNORECASE | re.DOTALL)
# Only the call's own leading "name" key: a name inside an echoed payload never names the call.
_NAME_GUESS = re.compile(r"""\s*[\[{]\s*(?:["']function["']\s*:\s*\{\s*)?["']name["']\s*:\s*["']([^"'\\]{1,200})["']""")
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


def _json_values(body: str) -> tuple[list[Any], bool]:
    """The whole body as one JSON value, else its first balanced JSON value; and whether that was
    cut off mid-JSON (closed here only to show it, never to run it).

    Only the first bracketed span counts: when it fails to parse there is no value, and whatever
    follows it (an echoed payload, a second object) never becomes or replaces the call.
    """
    whole = _loads(body)
    if whole is not _FAILED:
        return [whole], False
    values: list[Any] = []
    cut_off = False
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
                cut_off = True
            break
        value = _loads(body[start:end])
        if value is not _FAILED:
            values.append(value)
        break
    return values, cut_off


# ---- extracted calls --------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    name: str
    arguments: Any = None
    error: str | None = None
    raw: str | None = None
    incomplete: str | None = None
    """Why the call is not whole (cut off, no closing tag); such a call is shown, never run."""


_NO_CLOSING = "the call has no closing </tool_call> tag (the reply may have been cut off)"
_CUT_JSON = "its arguments are not valid JSON: the call was cut off mid-JSON"


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
    fn = obj["function"] if isinstance(obj.get("function"), dict) else obj
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


def _close_outside_strings(text: str, start: int) -> re.Match[str] | None:
    """The first closing tag after `start` that is not inside a double-quoted JSON string."""
    in_string, i = False, start
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "<":
            match = _CLOSE.match(text, i)
            if match is not None:
                return match
        i += 1
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
        balanced = json_end is not None and text[json_end - 1] in "}]"
        closed = _CLOSE.search(text, json_end) if balanced and json_end is not None else _close_outside_strings(text, after)
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
        found += [replace(f, incomplete=f.incomplete or _NO_CLOSING) for f in parse_body(text[after:json_end])]
        pos = json_end
        stray = _STRAY_CLOSE.match(text, pos)
        pos = stray.end() if stray else pos
    narrative.append(text[pos:])
    if not found:
        rest = "".join(narrative)
        for match in _FENCE_CALL.finditer(rest):
            unclosed = match.end() == len(rest) and not re.search(rf"(?:```|</(?:{_TAGS})>)\Z", match.group(0))
            found += [replace(f, incomplete=f.incomplete or (_NO_CLOSING if unclosed else None))
                      for f in parse_body(match.group(1))]
        if found:
            narrative = [_FENCE_CALL.sub("", rest)]
    return re.sub(r"\n{3,}", "\n\n", "".join(narrative)).strip(), found


def _json_body(body: str) -> list[_Found]:
    cleaned = _strip_fence(body)
    values, cut_off = _json_values(cleaned)
    found = [f for value in values for f in _calls_from_value(value, cleaned)]
    if found:
        if cut_off:  # the last value was closed by the parser: its calls are shown, never run
            last = _calls_from_value(values[-1], cleaned)
            found = found[:-len(last)] + [replace(f, incomplete=f.incomplete or _CUT_JSON) for f in last]
        return found
    guess = _NAME_GUESS.match(cleaned)
    return [_Found(guess.group(1).strip() if guess else "", raw=cleaned, incomplete="its tool call is not valid JSON",
                   error='the tool call is not valid JSON; write <tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>')]


# ---- P-format extent -------------------------------------------------------------------


# The scanner needs where an unclosed `<tool_call>name[...]` ends; the rest of P-format is in
# `dialect_pformat.py`.
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


# ---- found calls to ToolCalls ----------------------------------------------------------


def _to_tool_calls(found: list[_Found], prefix: str, turn: int) -> list[ToolCall]:
    calls = []
    for index, item in enumerate(found):
        call_id = f"{prefix}_{turn}_{index}"
        if item.error is not None:
            calls.append(ToolCall(id=call_id, name=item.name, raw_arguments=item.raw or "", parse_error=item.error,
                                  incomplete=item.incomplete))
        else:
            call = parse_tool_arguments(call_id, item.name, item.arguments)
            calls.append(call.model_copy(update={"incomplete": item.incomplete}) if item.incomplete else call)
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
