"""The recursive task protocol (SPEC A1–A12): its rules, its flow and its tools, in one package.

It sits between `tools/` and `core/`: it imports `trace/`, `llm/`, `tools/` and
`cyber_agent/errors.py`, never `core/`; it reaches the runner only through
`cyber_agent/protocol/ports.py:ProtocolRunner` (which `AgentRunner` satisfies).

Modules: `mode` (legacy vs recursive policy), `tool_rights` (which tools a run may see),
`briefs` (the context boundary: what a child receives), `state` (reads and writes of
`Trace.protocol`), `delegation` (children from briefs), `validation` (independent validators),
`flow` (what a final text means per role), `web_evidence` (search and SSRF-safe fetching),
`claims` (claims with citations: what a text states) and `evidence_check` (the deterministic
check of a report's claims against the persisted tree, before any validator),
`ports` (what the protocol asks of the runner), and the tools: `agent_tool` (`agent`),
`report_tools` (`submit_report`, `review_task`, `read_context_ref`, the validator's tools),
`web_tools` (`web_search`, `fetch_page`).

Every name below is imported on first use (`__getattr__`): `core/` imports single modules of
this package, and importing `mode` must not load the web fetcher (httpx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cyber_agent._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from cyber_agent.protocol.agent_tool import agent, register_agent_tool
    from cyber_agent.protocol.briefs import build_child_task_message, grant_context_refs, normalize_task_brief, task_briefs_match
    from cyber_agent.protocol.delegation import continue_child, run_recursive_agents
    from cyber_agent.protocol.flow import FinalTextDecision, on_final_text
    from cyber_agent.protocol.mode import AgentMode, AgentPolicy, MAX_CHILDREN_PER_PARENT, MAX_RECURSIVE_DEPTH, policy_from_environment
    from cyber_agent.protocol.ports import ChildResult, ChildSetup, ChildSpec, ProtocolRunner, TreeBudget, protocol_runner
    from cyber_agent.protocol.report_tools import register_protocol_tools
    from cyber_agent.protocol.state import update_protocol
    from cyber_agent.protocol.tool_rights import child_tool_snapshot, runtime_tool_names, tighten_by_state
    from cyber_agent.protocol.validation import render_validation, run_validation
    from cyber_agent.protocol.web_tools import register_web_tools
    from cyber_agent.trace.protocol_records import RootTaskAnchor, TaskBrief, TaskReport, TaskReview, ValidationResult

__all__ = [
    "AgentMode",
    "AgentPolicy",
    "ChildResult",
    "ChildSetup",
    "ChildSpec",
    "FinalTextDecision",
    "MAX_CHILDREN_PER_PARENT",
    "MAX_RECURSIVE_DEPTH",
    "ProtocolRunner",
    "RootTaskAnchor",
    "TaskBrief",
    "TaskReport",
    "TaskReview",
    "TreeBudget",
    "ValidationResult",
    "agent",
    "build_child_task_message",
    "child_tool_snapshot",
    "continue_child",
    "grant_context_refs",
    "normalize_task_brief",
    "on_final_text",
    "policy_from_environment",
    "protocol_runner",
    "register_agent_tool",
    "register_protocol_tools",
    "register_web_tools",
    "render_validation",
    "run_recursive_agents",
    "run_validation",
    "runtime_tool_names",
    "task_briefs_match",
    "tighten_by_state",
    "update_protocol",
]

_LAZY: dict[str, tuple[str, ...]] = {
    "cyber_agent.protocol.agent_tool": ("agent", "register_agent_tool",),
    "cyber_agent.protocol.briefs": ("build_child_task_message", "grant_context_refs", "normalize_task_brief", "task_briefs_match",),
    "cyber_agent.protocol.delegation": ("continue_child", "run_recursive_agents",),
    "cyber_agent.protocol.flow": ("FinalTextDecision", "on_final_text",),
    "cyber_agent.protocol.mode": ("AgentMode", "AgentPolicy", "MAX_CHILDREN_PER_PARENT", "MAX_RECURSIVE_DEPTH", "policy_from_environment",),
    "cyber_agent.protocol.ports": ("ChildResult", "ChildSetup", "ChildSpec", "ProtocolRunner", "TreeBudget", "protocol_runner",),
    "cyber_agent.protocol.report_tools": ("register_protocol_tools",),
    "cyber_agent.protocol.state": ("update_protocol",),
    "cyber_agent.protocol.tool_rights": ("child_tool_snapshot", "runtime_tool_names", "tighten_by_state",),
    "cyber_agent.protocol.validation": ("render_validation", "run_validation",),
    "cyber_agent.protocol.web_tools": ("register_web_tools",),
    "cyber_agent.trace.protocol_records": ("RootTaskAnchor", "TaskBrief", "TaskReport", "TaskReview", "ValidationResult",),
}

__getattr__, __dir__ = _lazy_exports(globals(), _LAZY)
