"""The columns of every frame of `TraceFrames`, each declared once: name, dtype, meaning, how it is read.

In the spirit of inspect_ai's `MessageColumn`: one `FrameColumn` per column gives its name, its
pandas dtype, what it means (docs/notebook.md's schema tables are these declarations, checked by
`tests/notebook/test_frame_names.py`) and, for a column read as is from a store's columnar read,
the `cyber_agent/trace/columnar.py:ColumnarRead` column it comes from (`read`). Every other column
is computed by the frame builders (`frame_rows.py`, `protocol_rows.py`, `columnar.py`,
`frame_shape.py`), which fill columns by name, never by position. `SCHEMAS` (name -> dtype) is derived here.

Dtypes: strings are `string`, counts `int64` (`Int64` when a value may be missing), money and
durations `float64`, flags `bool` (`boolean` when unknown is possible), timestamps
`datetime64[ns, UTC]`, nested data (dicts, lists) `object`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FRAME_COLUMNS", "SCHEMAS", "SHAPE", "FrameColumn", "columns_read"]

TS = "datetime64[ns, UTC]"
S, I, NI, F, B, NB, O = "string", "int64", "Int64", "float64", "bool", "boolean", "object"  # noqa: E741 - dtype shorthands


@dataclass(frozen=True, slots=True)
class FrameColumn:
    """One column of a frame."""

    name: str
    dtype: str
    """The pandas dtype of the column (also of an empty frame)."""
    meaning: str = ""
    """What a value says (the schema table of docs/notebook.md)."""
    read: str | None = None
    """The `ColumnarRead` column (messages or events table) it is read from as is, converted to `dtype`;
    None: a frame builder computes it."""


C = FrameColumn

SHAPE: tuple[FrameColumn, ...] = (
    C("nodes", NI, "delegation shape of the tree (root rows only; `cyber_agent/analysis/shape.py:shape_of`): agents in it"),
    C("max_depth", NI, "shape: deepest level (root 0)"),
    C("parents", NI, "shape: nodes with children"),
    C("mean_fanout", F, "shape: children per node with children (NaN without any)"),
    C("max_fanout", NI, "shape: most children of one node (0 without any)"),
    C("longest_chain", NI, "shape: most consecutive nodes on a root-to-leaf path with at most one child"),
    C("own_calls", NI, "shape: the root's LLM calls (when messages were read)"),
    C("subtree_calls", NI, "shape: LLM calls of every other node (when messages were read)"),
    C("own_tokens", NI, "shape: the root's tokens"),
    C("subtree_tokens", NI, "shape: tokens of every other node"),
    C("own_share", F, "shape: the root's share of the tree's LLM calls (when messages were read)"),
    C("overcommitted", NB, "shape, ReDel: at most 2 nodes — the root did it alone"),
    C("undercommitted", NB, "shape, ReDel: `longest_chain` of at least 3 — needless hand-offs"),
    C("delegated_without_work", NB, "shape: the root has children and called only delegation tools (when messages were read)"),
    C("idle_delegators", NI, "shape: nodes with children that called only delegation tools (when messages were read)"),
    C("root_did_the_work", NB, "shape: the root's own LLM calls are more than half of the tree's (when messages were read)"),
)
"""Delegation-shape columns (`cyber_agent/analysis/shape.py:SHAPE_COLUMNS` without `trace_id`) of the traces and
usage frames: a root's row holds its tree's shape with the default thresholds, validators left out (what
`delegation_shape(store, root)` returns); every other row is empty (`<NA>`). `frame_shape.py` fills them."""


FRAME_COLUMNS: dict[str, tuple[FrameColumn, ...]] = {
    "traces": (
        C('trace_id', S, 'the trace'),
        C('root_trace_id', S, 'root of its tree'),
        C('parent_trace_id', S, 'the trace that started it (None for a root)'),
        C('parent_goal_id', S, "the parent's goal it works for"),
        C('depth', I, '0 for a root'),
        C('position', I, 'order of the record (parents first)'),
        C('label', S, 'short name: the role for a root, `{mode} {n}` for a sub-trace'),
        C('role', S, "the agent's role: `validator`, or the agent type (main, delegate, explore, ...)"),
        C('agent_type', S, 'agent type as persisted'),
        C('agent_mode', S, '`legacy` or `recursive`'),
        C('created_by_tool', S, '`agent`, `validator`, ... (None for a root)'),
        C('is_validator', B, 'a validator trace'),
        C('validation_scope', S, 'validator: `criteria` or `root`'),
        C('mode', S, '`call` or `agent`'),
        C('status', S, 'running, completed, failed, stopped, waiting_confirmation'),
        C('task', S, 'the task text'),
        C('model', S, 'model name'),
        C('name', S, 'optional run name'),
        C('total_messages', I, 'messages of every branch'),
        C('total_prompt_tokens', I, 'input tokens'),
        C('total_completion_tokens', I, 'output tokens'),
        C('total_cached_tokens', I, 'cached input tokens'),
        C('total_tokens', I, 'input plus output tokens'),
        C('total_cost', F, 'USD'),
        C('head_sequence', I, 'last message of the main path'),
        C('current_goal_id', S, 'goal in focus'),
        C('result_summary', S, 'final answer (completed runs)'),
        C('error_message', S, 'why it did not complete'),
        C('refusal', S, 'its last refused tool call (a limit that said no), when messages were read'),
        C('created_at', TS),
        C('updated_at', TS),
        C('completed_at', TS),
        C('duration_seconds', F, 'created → completed (or last update)'),
        C('context', O, "the trace's context (dict)"),
        C('protocol', O, 'recursive protocol state: brief, report, validations, reviews (dict)'),
        C('root_setup', O, "a recursive root's anchor, budget, validator models (dict)"),
        C('resource_usage', O, "a recursive root's budget usage (dict)"),
        C('source', S, '`native` (run here), or the format it was imported from: `inspect`, `otel`, `redel` ([importers.md](importers.md))'),
        C('provenance', S, 'native: the store URL or export file the frame was read from; imported: the file it came from'),
        C('source_ids', O, "imported: the source's own ids (dict: ReDel `node_id`, Inspect `sample_id`/`epoch`, OTel `span_id`, ...); None for native"),
        C('missing', S, 'imported: what the source does not record, comma-separated (`usage`, `cost`, `timestamps`, `model`, ...)'),
        *SHAPE,
    ),
    "messages": (
        C('trace_id', S, read='trace_id'),
        C('message_id', S, '`{trace_id}-{sequence:04d}`', read='message_id'),
        C('sequence', I, 'position in the trace, from 1', read='sequence'),
        C('message_role', S, "the message's own role: system, user, assistant, tool", read='role'),
        C('goal_id', S, 'goal it served', read='goal_id'),
        C('parent_sequence', NI, 'previous message of its branch', read='parent_sequence'),
        C('branch', S, 'side-branch label', read='branch'),
        C('on_main_path', B, 'on the path from the head back'),
        C('text', S, "its text (an assistant's text part)", read='text'),
        C('n_tool_calls', I, 'tool calls of an assistant turn', read='n_tool_calls'),
        C('tool_call_names', S, 'their names, comma-separated', read='tool_call_names'),
        C('tool_call_id', S, 'tool result: the call it answers', read='tool_call_id'),
        C('tool_name', S, 'tool result: the tool', read='tool_name'),
        C('is_error', NB, 'tool result: an error', read='is_error'),
        C('refused', S, 'tool result refused by a limit: `children`, `agents`, `depth`, ..., or `rejected` (not run)', read='refused'),
        C('description', S, 'short generated description', read='description'),
        C('prompt_tokens', I, 'input tokens of the call', read='prompt_tokens'),
        C('completion_tokens', I, 'output tokens', read='completion_tokens'),
        C('cached_tokens', I, 'cached input tokens', read='cached_tokens'),
        C('total_tokens', I, 'input plus output tokens'),
        C('cost', F, 'USD of the call', read='cost'),
        C('duration_ms', F, 'model call or tool run', read='duration_ms'),
        C('model', S, 'model that answered', read='model'),
        C('usage_estimated', B, 'the provider reported no usage: tokens estimated (characters ÷ 4)', read='usage_estimated'),
        C('cost_estimated', B, 'cost computed from a price table or estimated tokens, not reported by the provider', read='cost_estimated'),
        C('cost_unpriced', B, 'no price known: booked at $0', read='cost_unpriced'),
        C('truncated', B, 'tool result cut (by the tool, or by the result budget)', read='truncated'),
        C('summarized', B, 'tool result replaced by a summary (the result budget)', read='summarized'),
        C('created_at', TS, read='created_at'),
    ),
    "tool_calls": (
        C('trace_id', S),
        C('message_id', S, 'the assistant message'),
        C('sequence', I, 'its sequence'),
        C('call_index', I, 'position in the turn'),
        C('call_id', S),
        C('tool_name', S),
        C('arguments', O, 'arguments (dict)'),
        C('result_sequence', NI, 'sequence of the result (NA: none yet)'),
        C('is_error', NB, 'the result is an error'),
        C('refused', S, 'as `messages.refused`'),
        C('truncated', NB, 'the result was cut'),
        C('summarized', NB, 'the result was summarized'),
        C('result_chars', NI, 'length of the result text'),
        C('duration_ms', F, 'tool run'),
        C('created_at', TS, 'of the call'),
    ),
    "goals": (
        C('trace_id', S),
        C('goal_id', S),
        C('parent_goal_id', S),
        C('depth', I, '0 for a top goal'),
        C('position', I, 'plan order'),
        C('description', S),
        C('reason', S),
        C('type', S, '`normal` or `agent_call`'),
        C('status', S, 'as persisted'),
        C('trace_status', S, 'status of the trace holding the goal'),
        C('effective_status', S, '`status`, except a goal left open by a trace that ended failed/stopped takes that status'),
        C('summary', S, 'outcome written when it completed'),
        C('n_sub_traces', I, 'children it started'),
        C('sub_trace_ids', O, 'their ids (list)'),
        C('self_messages', I, 'messages under the goal itself'),
        C('self_tokens', I),
        C('self_cost', F),
        C('cumulative_messages', I, 'with its sub-goals'),
        C('cumulative_tokens', I),
        C('cumulative_cost', F),
        C('is_current', B, 'the goal in focus'),
        C('created_at', TS),
        C('completed_at', TS),
    ),
    "events": (
        C('trace_id', S, read='trace_id'),
        C('event_id', I, 'dense per trace, from 1', read='event_id'),
        C('type', S, 'goal_added, message_added, sub_trace_started, ...', read='type'),
        C('created_at', TS, read='created_at'),
        C('goal_id', S, 'goal concerned', read='goal_id'),
        C('message_sequence', NI, '`message_added`: the message (its row in `messages`)', read='message_sequence'),
        C('sub_trace_id', S, '`sub_trace_started` / `_completed`: the child', read='sub_trace_id'),
        C('status', S, 'a status in the payload', read='status'),
        C('payload', O, 'the rest of the payload (dict)'),
    ),
    "usage": (
        C('trace_id', S),
        C('root_trace_id', S),
        C('parent_trace_id', S),
        C('depth', I),
        C('role', S, 'as `traces.role`'),
        C('label', S),
        C('status', S),
        C('llm_calls', NI, 'assistant messages (NA without messages)'),
        C('tool_calls', NI, 'tool results'),
        C('total_prompt_tokens', I),
        C('total_completion_tokens', I),
        C('total_cached_tokens', I),
        C('total_tokens', I),
        C('total_cost', F, 'USD'),
        C('estimated_calls', NI, 'calls whose usage or cost was estimated'),
        C('unpriced_calls', NI, 'calls with no price (booked at $0)'),
        C('duration_seconds', F),
        *SHAPE,
    ),
    "reports": (
        C('trace_id', S),
        C('parent_trace_id', S),
        C('root_trace_id', S),
        C('depth', I),
        C('role', S, 'as `traces.role`'),
        C('objective', S, "the brief's"),
        C('brief', O, 'the TaskBrief (dict)'),
        C('outcome', S, 'completed, partial, failed'),
        C('summary', S),
        C('outputs', O, '(list)'),
        C('evidence', O, '(list)'),
        C('open_issues', O, '(list)'),
        C('artifacts', O, '(list)'),
        C('submitted_by', S),
        C('review_decision', S, 'accept, revise, replan, split, fail'),
        C('review_feedback', S),
    ),
    "validations": (
        C('trace_id', S, 'the judged trace'),
        C('validator_trace_id', S),
        C('validation_index', I, 'counts the validations of the judged trace (its report rounds)'),
        C('scope', S, '`criteria` (a report) or `root` (the final answer)'),
        C('verdict', S, "the validation's verdict: pass, fail, unknown"),
        C('summary', S),
        C('criterion_index', NI),
        C('criterion', S),
        C('criterion_verdict', S, 'pass, fail, unknown'),
        C('criterion_evidence', S),
        C('created_at', TS),
    ),
    "claims": (
        C('trace_id', S, 'the reporting trace'),
        C('validation_index', I, "the evidence check's position in the trace's validations"),
        C('claim_index', NI, '0-based claim of the report; missing for a whole-report signal'),
        C('claim', S, "the claim's text (or the signal's name)"),
        C('evidence', O, "the claim's citations (list of `EvidenceRef` dicts)"),
        C('check_verdict', S, 'pass, fail, unknown'),
        C('code', S, 'e.g. supported, number_not_found, child_not_returned'),
        C('reason', S, 'what was checked and found'),
        C('location', S, 'the cited trace, message, tool call or path'),
        C('excerpt', S, 'the cited text around the quote or number'),
        C('report_verdict', S, "the whole check's verdict"),
        C('created_at', TS),
    ),
    "verdicts": (
        C('trace_id', S, 'the judged trace'),
        C('validator_trace_id', S),
        C('validation_index', I, 'as in `validations`'),
        C('scope', S),
        C('verdict', S, 'pass, fail, unknown'),
        C('summary', S),
        C('criteria', I, 'criteria judged'),
        C('passed', I, 'of those, pass'),
        C('failed', I, 'fail'),
        C('unknown', I, 'unknown'),
        C('created_at', TS),
    ),
}
"""Every frame's columns, in frame order."""

SCHEMAS: dict[str, dict[str, str]] = {frame: {c.name: c.dtype for c in columns} for frame, columns in FRAME_COLUMNS.items()}
"""Column name -> dtype of every frame of `TraceFrames` (derived from `FRAME_COLUMNS`)."""


def columns_read(frame: str) -> dict[str, str]:
    """Frame column -> `ColumnarRead` column, for the columns of `frame` read as is."""
    return {c.name: c.read for c in FRAME_COLUMNS[frame] if c.read is not None}
