"""What a message's `metadata` says, typed (issue 27, item 3): `Message.metadata` is a `MessageMetadata`.

    message.metadata.is_error          # True / False on tool results, None where nobody said
    message.metadata.refusal_kind      # the limit that refused a tool call, "rejected", or None
    message.metadata["exit_code"]      # a key a tool or a user added (kept as it was given)

The runner, the harness, the importers and the tools write the keys below; any other key (a
tool's own `ToolResult.metadata`, a user's `Message.create(metadata=...)`) is kept beside them
(`extra="allow"`), so the persisted shape stays the flat JSON object it always was. A typed key
that nobody set is None and is left out when the message is written, so records do not grow and
readers of the raw JSON (the frames, the SQLite columns, older versions) read what they read
before. Records written before the keys were typed load unchanged (`_migrate`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer, model_validator

__all__ = ["REFUSAL_FLAGS", "MessageMetadata", "ResultShaping", "refusal_kind"]

REFUSAL_FLAGS: tuple[str, ...] = ("refused", "rejected")
"""Tool-message metadata keys that mark a refusal: `refused` (a limit refused the call; the value
names it, see `ToolRefusedError`) and `rejected` (the call was not run: a cap, a budget overrun)."""


class ResultShaping(BaseModel):
    """How the harness shaped an oversized tool result (`metadata.payload`; `core/summarizer.py:SummaryOutcome`)."""

    model_config = ConfigDict(extra="allow")

    path: str | None = None
    """`summarized` or `truncated` (a passthrough is not recorded)."""
    reason: str | None = None
    """Why this path: over the threshold, over max_input_bytes, a failed summary, ..."""
    original_bytes: int | None = None
    """UTF-8 size of the raw result."""
    final_bytes: int | None = None
    """UTF-8 size of the text the model saw."""
    truncated: bool | None = None
    """True when the byte budget cut the text."""
    llm_called: bool | None = None
    """True when a summarizer call was made."""
    summary_cost: float | None = None
    """USD cost of the summarizer call."""
    error: str | None = None
    """Why the summary attempt failed, when it did."""


class MessageMetadata(BaseModel):
    """The keys the library writes on a message, typed; any other key is kept as given."""

    model_config = ConfigDict(extra="allow")

    # ---- tool results -----------------------------------------------------------------
    is_error: bool | None = None
    """Tool results: True when the tool failed (the model is told so), False when it ran; None elsewhere."""
    refused: str | None = None
    """A limit of the run refused the call and is named here (`ToolRefusedError.limit`: depth, child quota, ...)."""
    rejected: bool | None = None
    """The call was not run (a cap, a budget overrun, a denied approval)."""
    not_run: str | None = None
    """Why a rejected call was not run."""
    not_executed: bool | None = None
    """A continued run answered a call that was never started (`core/open_calls.py`)."""
    execution_unknown: bool | None = None
    """A continued run answered a call that started but left no result: it may have run."""
    truncated: bool | None = None
    """The result was cut to fit (a file tool's own flag, or the harness's byte budget)."""
    payload: ResultShaping | None = None
    """How the harness summarized or truncated an oversized result."""
    duration_ms: float | None = None
    """Wall time of the tool function (the registry's own measure; `Message.duration_ms` is the runner's)."""
    # ---- model calls ------------------------------------------------------------------
    model: str | None = None
    """The model that answered (assistant messages)."""
    cost_estimated: bool | None = None
    """The cost is a price-table estimate, not the provider's figure."""
    cost_unpriced: bool | None = None
    """No price covers the model: the cost is not known (0 booked)."""
    usage_estimated: bool | None = None
    """The provider reported no usage; the tokens are an estimate."""
    usage_invalid: str | None = None
    """What was wrong with the usage the provider reported (the stored numbers are 0 or estimates)."""
    http_retries: int | None = None
    """HTTP attempts retried before this reply."""
    retry_wait_s: float | None = None
    """Seconds waited over those retries."""
    # ---- side branches ----------------------------------------------------------------
    compaction: str | None = None
    """A compaction call's kind (the helper message on the `compaction` branch)."""
    tokens_before: int | None = None
    """History tokens before that compaction."""
    tokens_after: int | None = None
    """History tokens after it."""
    protocol: bool | None = None
    """A message the recursive protocol added itself (a reminder, a report request)."""
    # ---- imported runs ----------------------------------------------------------------
    source_ids: dict[str, Any] | None = None
    """Imported messages: the ids the source format gave them."""
    content_missing: bool | None = None
    """Imported messages: the source recorded that a message existed but not its content."""

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return _migrate(data)

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A typed key nobody set is left out: the record keeps the shape it was written with.
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None or key not in _TYPED}

    # ---- what the keys mean -----------------------------------------------------------
    @property
    def refusal_kind(self) -> str | None:
        """What refused a tool call: the limit `refused` names, `rejected` for a call not run, else None."""
        return self.refused or ("rejected" if self.rejected else None)

    @property
    def is_refusal(self) -> bool:
        """True when a tool message marks a refusal (one definition for the runner, the frames and the API)."""
        return self.refusal_kind is not None

    @property
    def was_truncated(self) -> bool:
        """True when the result the model saw was cut (by the tool or by the harness)."""
        return bool(self.truncated) or (self.payload is not None and self.payload.path == "truncated")

    @property
    def was_summarized(self) -> bool:
        """True when the model saw a summary of the result instead of the result."""
        return self.payload is not None and self.payload.path == "summarized"

    # ---- read by name (the dict it was, for code written against it; typed code uses the attributes) ----
    def to_dict(self) -> dict[str, Any]:
        """The keys as persisted (JSON values), extras included."""
        return self.model_dump(mode="json")

    def keys(self) -> list[str]:
        """The keys that are set (typed ones not None, and every extra), as `dict(metadata)` reads them."""
        return [key for key, value in self._items() if value is not None or key not in _TYPED]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of a typed or extra key, `default` when it is not set."""
        value = self._lookup(key)
        return default if value is _MISSING else value

    def __getitem__(self, key: str) -> Any:
        value = self._lookup(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._lookup(key) is not _MISSING

    def __eq__(self, other: object) -> bool:
        # Equal to the dict it was written from, as the free-form dict it replaces was.
        if isinstance(other, Mapping):
            return self.model_dump() == dict(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dict it replaces

    def _lookup(self, key: str) -> Any:
        if key in _TYPED:
            value = getattr(self, key)
            if isinstance(value, BaseModel):
                return value.model_dump()  # read by name, a nested record reads as the dict it was (a copy)
            return _MISSING if value is None else value
        extra = self.__pydantic_extra__ or {}
        return extra.get(key, _MISSING)

    def _items(self) -> Iterator[tuple[str, Any]]:
        yield from self.__dict__.items()
        yield from (self.__pydantic_extra__ or {}).items()


_TYPED = frozenset(MessageMetadata.model_fields)
_MISSING: Any = object()


def _migrate(data: Any) -> Any:
    """Records of any earlier version load unchanged: only what the types cannot say is rewritten."""
    if data is None:
        return {}  # a foreign or hand-made record with "metadata": null
    if isinstance(data, MessageMetadata) or not isinstance(data, Mapping):
        return data
    refused = data.get("refused")
    if refused is not None and not isinstance(refused, str):
        # `refused: true` (a flag before the limit was named) means the generic kind "refused".
        data = {**data, "refused": "refused" if refused else None}
    return data


def refusal_kind(metadata: MessageMetadata | Mapping[str, Any] | None) -> str | None:
    """What refused a tool call, read from a typed metadata or from a message's raw JSON (the frames read those)."""
    if metadata is None:
        return None
    if isinstance(metadata, MessageMetadata):
        return metadata.refusal_kind
    refused = metadata.get("refused")
    if refused:
        return refused if isinstance(refused, str) else "refused"
    return "rejected" if metadata.get("rejected") else None
