"""A small ReDel run written the way ReDel writes one (state.json + events.jsonl), for the importer's tests.

Root `kanpai` delegates twice (one call refused as ReDel refuses "the entire task"), child
`alpha` answers from a search, child `beta` delegates once more to `gamma`. Every assistant
message is followed by a `tokens_used` event, as ReDel's `add_completion_to_history` dispatches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT, ALPHA, BETA, GAMMA = "root-0000", "alpha-0001", "beta-0002", "gamma-0003"
START = 1718312142.0


def _msg(role: str, content: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, "name": extra.get("name"), "tool_call_id": extra.get("tool_call_id"),
            "tool_calls": extra.get("tool_calls"), "is_tool_call_error": extra.get("is_tool_call_error")}


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


HISTORIES: dict[str, list[dict[str, Any]]] = {
    ROOT: [
        _msg("user", "Compare the heights of the two tallest trees."),
        _msg("assistant", None, tool_calls=[_call("c0", "delegate", instructions="Compare the heights of the two tallest trees.")]),
        _msg("function", "You shouldn't delegate the entire task to a helper.", name="delegate", tool_call_id="c0",
             is_tool_call_error=False),
        _msg("assistant", None, tool_calls=[_call("c1", "delegate", instructions="Height of Hyperion?"),
                                             _call("c2", "delegate", instructions="Height of Centurion?")]),
        _msg("function", "115.9 m", name="delegate", tool_call_id="c1", is_tool_call_error=False),
        _msg("function", "100.5 m", name="delegate", tool_call_id="c2", is_tool_call_error=False),
        _msg("assistant", "Hyperion (115.9 m) is taller than Centurion (100.5 m)."),
    ],
    ALPHA: [
        _msg("user", "Height of Hyperion?"),
        _msg("assistant", None, tool_calls=[_call("a1", "search", query="Hyperion tree")]),
        _msg("function", "Hyperion is 115.92 m tall.", name="search", tool_call_id="a1", is_tool_call_error=False),
        _msg("assistant", "115.9 m"),
    ],
    BETA: [
        _msg("user", "Height of Centurion?"),
        _msg("assistant", None, tool_calls=[_call("b1", "delegate", instructions="Look up Centurion, the eucalyptus")]),
        _msg("function", "100.5 m", name="delegate", tool_call_id="b1", is_tool_call_error=False),
        _msg("assistant", None, tool_calls=[_call("b2", "search", query="")]),
        _msg("function", "search failed", name="search", tool_call_id="b2", is_tool_call_error=True),
        _msg("assistant", "100.5 m"),
    ],
    GAMMA: [
        _msg("user", "Look up Centurion, the eucalyptus"),
        _msg("assistant", "100.5 m"),
    ],
}
PARENTS = {ROOT: None, ALPHA: ROOT, BETA: ROOT, GAMMA: BETA}
DEPTHS = {ROOT: 0, ALPHA: 1, BETA: 1, GAMMA: 2}
NAMES = {ROOT: "kanpai", ALPHA: "alpha", BETA: "beta", GAMMA: "alpha"}


def _node(node_id: str) -> dict[str, Any]:
    return {"id": node_id, "depth": DEPTHS[node_id], "parent": PARENTS[node_id],
            "children": [c for c, p in PARENTS.items() if p == node_id], "always_included_messages": [],
            "chat_history": HISTORIES[node_id], "state": "stopped", "name": NAMES[node_id],
            "engine_type": "OpenAIEngine", "functions": [{"name": "delegate"}]}


def tokens_for(node_id: str, index: int) -> tuple[int, int]:
    """The (prompt, completion) tokens the events give the assistant message at `index`."""
    return 100 * DEPTHS[node_id] + 10 * index + 7, index + 3


def write_run(folder: Path, *, events: bool = True) -> Path:
    """Write the run into `folder`; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = []
    clock = [START]

    def stamp() -> float:
        clock[0] += 0.5
        return clock[0]

    def spawn(node_id: str) -> None:
        lines.append({"type": "kani_spawn", "timestamp": stamp(), **{**_node(node_id), "chat_history": []}})

    def say(node_id: str, index: int) -> None:
        message = HISTORIES[node_id][index]
        lines.append({"type": "kani_message", "timestamp": stamp(), "id": node_id, "msg": message})
        if message["role"] == "assistant":
            prompt, completion = tokens_for(node_id, index)
            lines.append({"type": "tokens_used", "timestamp": stamp(), "id": node_id, "prompt_tokens": prompt,
                          "completion_tokens": completion})

    spawn(ROOT)
    for i in range(4):
        say(ROOT, i)
    spawn(ALPHA)
    for i in range(4):
        say(ALPHA, i)
    spawn(BETA)
    for i in range(2):
        say(BETA, i)
    spawn(GAMMA)
    for i in range(2):
        say(GAMMA, i)
    for i in range(2, 6):
        say(BETA, i)
    for i in range(4, 7):
        say(ROOT, i)
    state = {"id": f"{int(START)}-fixture", "title": "fixture: two trees", "last_modified": clock[0] + 1,
             "n_events": len(lines), "state": [_node(n) for n in (ROOT, ALPHA, BETA, GAMMA)]}
    (folder / "state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    if events:
        (folder / "events.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return folder
