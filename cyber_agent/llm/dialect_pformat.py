"""The P-format of small models: parse and render `name[v1|v2]` against the tools' schemas.

Values are positional in the alphabetical order of the tool's parameter names and coerced to the
schema's integer/number/boolean types. `PFormatDialect` in `cyber_agent.llm.dialects` uses these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from cyber_agent.llm.dialect_parsing import _CLOSE, _OPEN, _PF_HEAD, _Found, _pf_close

__all__: list[str] = []


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
    if _OPEN.search(inner) or _CLOSE.search(inner):
        # A value holding a call tag is an echoed payload or a call whose `]` was not escaped:
        # which call was meant is ambiguous, so none runs.
        return _Found(name, raw=body, error="a value contains a <tool_call> tag, so the call is ambiguous; "
                                            "escape a literal ] as \\] or use the JSON form")
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
