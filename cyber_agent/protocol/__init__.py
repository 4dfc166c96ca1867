"""The recursive task protocol (SPEC A1–A12): its rules, its flow and its tools, in one package.

It sits between `tools/` and `core/`: it imports `trace/`, `llm/`, `tools/` and
`cyber_agent/errors.py`, never `core/`; it reaches the runner only through
`cyber_agent/protocol/ports.py:ProtocolRunner` (which `AgentRunner` satisfies).

Modules: `mode` (legacy vs recursive policy), `tool_rights` (which tools a run may see),
`briefs` (the context boundary: what a child receives), `state` (reads and writes of
`Trace.protocol`), `delegation` (children from briefs), `validation` (independent validators),
`flow` (what a final text means per role), `web_evidence` (search and SSRF-safe fetching),
`ports` (what the protocol asks of the runner), and the tools: `agent_tool` (`agent`),
`report_tools` (`submit_report`, `review_task`, `read_context_ref`, the validator's tools),
`web_tools` (`web_search`, `fetch_page`).
"""
