"""Every error cyber_agent raises, in one tree.

    CyberAgentError
    ├── ConfigurationError          a setting is missing or invalid (names the setting)
    ├── InvalidIdError              an id is malformed or could escape the store
    ├── NotFoundError
    │   ├── TraceNotFoundError
    │   ├── MessageNotFoundError
    │   └── GoalNotFoundError
    ├── StoreError
    │   ├── CorruptRecordError      a persisted file cannot be parsed (carries its path)
    │   ├── ConflictError           a write that contradicts persisted state
    │   │   └── TraceLockedError    another process holds a trace's writer lock too long (names it)
    │   ├── StoreUnavailableError   a store's database server cannot be reached, after bounded retries
    │   └── InvalidUpdateError      an update names an unknown or read-only field
    ├── GoalError                   an invalid goal-tree operation (the model sees it)
    ├── ToolError                   a tool call that cannot run (the model sees it)
    │   ├── UnknownToolError
    │   ├── ToolArgumentError
    │   └── ToolRefusedError        a limit of the run refused the call (child quota, tree budget, depth)
    ├── LLMError                    a provider call failed
    │   ├── LLMHTTPError            non-retryable HTTP status (4xx)
    │   ├── LLMTransportError       network failure after retries
    │   ├── LLMProtocolError        the provider answered with a body that cannot be read
    │   ├── ReplayDivergenceError   a replayed run asked something the recording did not hold
    │   └── ScriptExhaustedError    a scripted fake model was called more often than scripted
    ├── RunError                    a run cannot start or continue
    │   ├── BudgetExceededError     a tree-wide budget refused work
    │   └── RunInterruptedError     the kernel's interrupt (■) stopped a run (one line in a notebook)
    └── ImportFormatError           a file given to an importer is not what it claims (names the file)

Control-flow signals (approval required, stop requested) are not errors and live beside the
code that raises them. Exceptions carry data; they never log.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "BudgetExceededError",
    "ConfigurationError",
    "ConflictError",
    "CorruptRecordError",
    "CyberAgentError",
    "GoalError",
    "GoalNotFoundError",
    "ImportFormatError",
    "InvalidIdError",
    "InvalidUpdateError",
    "LLMError",
    "LLMHTTPError",
    "LLMProtocolError",
    "LLMTransportError",
    "MessageNotFoundError",
    "NotFoundError",
    "ReplayDivergenceError",
    "RunError",
    "RunInterruptedError",
    "ScriptExhaustedError",
    "StoreError",
    "StoreUnavailableError",
    "ToolArgumentError",
    "ToolError",
    "ToolRefusedError",
    "TraceLockedError",
    "TraceNotFoundError",
    "UnknownToolError",
]


class CyberAgentError(Exception):
    """Base of every error raised by cyber_agent."""


class ConfigurationError(CyberAgentError, ValueError):
    """A setting is missing or invalid."""

    def __init__(self, setting: str, message: str) -> None:
        self.setting = setting
        super().__init__(f"{setting}: {message}")


class InvalidIdError(CyberAgentError, ValueError):
    """An id is malformed or could escape the store's directory."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        super().__init__(f"invalid {kind} {value!r}: {reason}")


class NotFoundError(CyberAgentError, LookupError):
    """A record does not exist."""


class TraceNotFoundError(NotFoundError):
    """No trace has this id."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        super().__init__(f"trace {trace_id!r} not found; list traces with store.list_traces()")


class MessageNotFoundError(NotFoundError):
    """No message has this id."""

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        super().__init__(f"message {message_id!r} not found")


class GoalNotFoundError(NotFoundError):
    """No goal has this id in the trace's goal tree."""

    def __init__(self, trace_id: str, goal_id: str) -> None:
        self.trace_id = trace_id
        self.goal_id = goal_id
        super().__init__(f"goal {goal_id!r} not found in trace {trace_id!r}")


class StoreError(CyberAgentError):
    """A store operation failed."""


class CorruptRecordError(StoreError):
    """A persisted file exists but cannot be parsed."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.location = str(path)
        """Where the record is, as given (a database row's `server#schema.table/trace` keeps its `//`)."""
        super().__init__(f"corrupt record {self.location}: {reason}; restore the file or remove its trace")


class ConflictError(StoreError):
    """A write contradicts persisted state (duplicate id, decision already taken, ...)."""


class TraceLockedError(ConflictError):
    """Another process held a trace's writer lock for longer than the store waits."""

    def __init__(self, trace_id: str, holder: str, waited: float) -> None:
        self.trace_id = trace_id
        self.holder = holder
        self.waited = waited
        super().__init__(f"trace {trace_id!r} is being written by {holder}; waited {waited:.1f} s for its writer "
                         f"lock. Stop that process or wait for it, then retry")


class DatabaseLockedError(TraceLockedError):
    """Another process held a store's whole database (SQLite's file lock) for longer than `busy_timeout`."""

    def __init__(self, path: str, busy_timeout: float, trace_id: str | None = None) -> None:
        self.path = path
        self.trace_id, self.holder, self.waited = trace_id or "", f"another process on {path}", busy_timeout
        what = f" (writing trace {trace_id!r})" if trace_id else ""
        ConflictError.__init__(self, f"the SQLite database {path} is locked by another process{what}; waited "
                               f"busy_timeout={busy_timeout:g} s. Stop or wait for that process, raise busy_timeout "
                               "(sqlite:///PATH?busy_timeout=SECONDS), then retry")


class StoreUnavailableError(StoreError):
    """A store's database server could not be reached (or kept dropping the connection) within its retries."""

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        super().__init__(f"the store at {server} is unavailable: {reason}")


class InvalidUpdateError(StoreError, ValueError):
    """An update names an unknown or read-only field, or a value of the wrong type."""


class GoalError(CyberAgentError, ValueError):
    """A goal-tree operation is invalid; the message is meant for the model."""


class ToolError(CyberAgentError):
    """A tool call cannot run; the message goes back to the model as the tool result."""


class UnknownToolError(ToolError):
    """The tool is not registered or not exposed to this run."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        shown = ", ".join(sorted(available)) or "none"
        super().__init__(f"tool {name!r} is not available to this agent; available tools: {shown}")


class ToolRefusedError(ToolError):
    """A limit of the run refused the call; the tool message records `refused=<limit>` in its metadata."""

    def __init__(self, limit: str, message: str) -> None:
        self.limit = limit
        """Which limit refused: an A10 resource (`agents`, ...), `children` (the child quota) or `depth`."""
        super().__init__(message)


class ToolArgumentError(ToolError):
    """The arguments of a tool call do not validate."""


class LLMError(CyberAgentError):
    """A model call failed."""

    retries: tuple[object, ...] = ()
    """Attempts that failed and were retried before this error (`cyber_agent/llm/types.py:RetryRecord`)."""


class LLMHTTPError(LLMError):
    """The provider answered with a non-retryable HTTP status."""

    def __init__(self, status_code: int, body: str, url: str, hint: str = "") -> None:
        self.status_code = status_code
        self.body = body
        self.url = url
        self.hint = hint
        """The likely fix, naming the setting behind the failure ("" when there is none to give)."""
        text = f"provider returned HTTP {status_code} for {url}: {body[:500]}"
        super().__init__(f"{text} — {hint}" if hint else text)


class LLMTransportError(LLMError):
    """The provider could not be reached, or kept failing, after all retries."""


class LLMProtocolError(LLMError):
    """The provider answered 2xx with a body that is not the expected JSON or event stream."""


class ReplayDivergenceError(LLMError):
    """A replayed run asked for something the recording does not hold."""


class ScriptExhaustedError(LLMError):
    """A scripted fake model was called after its last scripted reply."""


class RunError(CyberAgentError):
    """A run cannot start or continue."""


class BudgetExceededError(RunError):
    """A tree-wide resource budget refused more work."""

    def __init__(self, resource: str, used: float, limit: float) -> None:
        self.resource = resource
        self.used = used
        self.limit = limit
        super().__init__(f"budget exceeded: {resource} used {used} of limit {limit}")


class RunInterruptedError(RunError):
    """An interrupt (the kernel's ■, Ctrl-C) stopped a run while a cell waited for it.

    IPython shows it as its one message line (`_render_traceback_`), not a traceback: the stop
    is what the user asked for. `trace_id` names the stopped root, `status` its final status.
    """

    def __init__(self, trace_id: str | None, status: str, detail: str) -> None:
        self.trace_id = trace_id
        self.status = status
        super().__init__(f"stopped by interrupt: {detail}")

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class ImportFormatError(CyberAgentError, ValueError):
    """A file given to an importer is not the format it claims; names the file and the first misfit."""

    def __init__(self, path: Path | str, source: str, problem: str) -> None:
        self.path = Path(path)
        self.source = source
        self.problem = problem
        article = "an" if source[:1].lower() in "aeiou" else "a"
        super().__init__(f"{self.path} is not {article} {source}: {problem}")
