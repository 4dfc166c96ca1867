"""What a message's `metadata` says, typed (issue 27, item 3): `Message.metadata` is a `MessageMetadata`.

    message.metadata.is_error          # True / False on tool results, None where nobody said
    message.metadata.refusal_kind      # the limit that refused a tool call, "rejected", or None
    message.metadata["exit_code"]      # a key a tool or a user added (kept as it was given)

The runner, the harness, the importers and the tools write the keys below; any other key (a
tool's own `ToolResult.metadata`, a user's `Message.create(metadata=...)`) is kept beside them
(`extra="allow"`), so the persisted shape stays the flat JSON object it always was. A typed key
that nobody set is None and is left out when the message is written, so records do not grow and
readers of the raw JSON (the frames, the SQLite columns, older versions) read what they read
before. Records written before the keys were typed load unchanged (`MessageMetadata._named_refusal`; a `null`
metadata reads as empty, `cyber_agent/trace/models.py:Message`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import warnings

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_serializer

__all__ = ["REFUSAL_FLAGS", "UNTYPED_KEY", "MessageMetadata", "ResultShaping", "refusal_kind", "tool_metadata"]

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

    @model_serializer(mode="plain")
    def _as_given(self) -> dict[str, Any]:
        # The keys it was given, null ones too (the harness writes `error: null`), and no others.
        data = {key: value for key, value in self.__dict__.items() if key in self.model_fields_set}
        if self.__pydantic_extra__:
            data.update(self.__pydantic_extra__)
        return data


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

    @field_validator("refused", mode="before")
    @classmethod
    def _named_refusal(cls, value: Any) -> Any:
        # Migration of records of every earlier version: `refused: true` (a flag, before the limit was
        # named) is the generic kind "refused"; a false flag is no refusal. A field validator runs only
        # when the key is there, so the common record pays nothing (a model validator costs µs each).
        if value is None or isinstance(value, str):
            return value
        return "refused" if value else None

    @model_serializer(mode="plain")
    def _compact(self) -> dict[str, Any]:
        # A typed key nobody set is left out: the record keeps the shape it was written with.
        # Plain, not wrap: the values are JSON already (or a ResultShaping), so pydantic writes them
        # as they are, several times cheaper than serializing every None field and filtering after.
        data = {key: value for key, value in self.__dict__.items() if value is not None}
        if self.__pydantic_extra__:
            data.update(self.__pydantic_extra__)
        return data

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


UNTYPED_KEY = "untyped"
"""Where `tool_metadata` keeps a tool's value for a typed key that the type refuses (as given)."""


def tool_metadata(metadata: Mapping[str, Any]) -> MessageMetadata:
    """A tool's own metadata as a `MessageMetadata`, never failing the run over one of its keys.

    A tool (`ToolResult.metadata`) may use a name the library types with a value of another type
    (`{"truncated": "partly"}`). Before the keys were typed such a value was stored as given; now
    the key is moved under `untyped` (kept as given, a warning names it) and the rest is typed.
    """
    try:
        return MessageMetadata.model_validate(metadata)
    except ValidationError as exc:
        bad = {str(error["loc"][0]) for error in exc.errors() if error["loc"] and str(error["loc"][0]) in _TYPED}
        if not bad:
            raise
        kept = {key: value for key, value in metadata.items() if key not in bad}
        untyped = dict(kept.get(UNTYPED_KEY) or {}) if isinstance(kept.get(UNTYPED_KEY), Mapping) else {}
        untyped.update({key: metadata[key] for key in sorted(bad)})
        kept[UNTYPED_KEY] = untyped
        warnings.warn(f"tool metadata: {', '.join(sorted(bad))} kept under {UNTYPED_KEY!r} (the value is not "
                      f"what the typed key takes; cyber_agent/trace/message_metadata.py:MessageMetadata)",
                      RuntimeWarning, stacklevel=2)
        return MessageMetadata.model_validate(kept)
