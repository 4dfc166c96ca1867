"""The canonical request and its key, built from what a request adds to the conversation's last one.

`ExchangeRecorder` (`cassette.py`) records every model call of a run with `request_key` of the
whole canonical request (`replay.canonical_request`, ids normalised by `call_site.normalise_ids`).
Built from scratch, that is a JSON round trip, a normalising walk and a sorted dump of the whole
history on every call: O(N) per step, O(N²) per run (at 400 steps it was 95% of a run's time).
A run's next request is its last one plus a few messages, so `RequestCache` keeps, per
conversation, each message's canonical form, its normalised key text and the SHA-256 state after
it, and only builds what is new. The results are the same values, key for key:

- the key text of a request is `{"messages":[m1,m2,...],"model":...,"tools":...}` with each item
  dumped on its own (a sorted dump of a list is the join of its items' dumps), and numbering of
  ids only grows, so the numbering after message i is the first entries of the numbering after
  the last message (`counts`);
- a message is reused only when it is the same object as in the last request (one pointer
  compare each, in C); a new object from there on is rebuilt (a compacted tail, a new list).
  So the cache relies on what the runner does: its history (`RunState.history`) is appended to
  and its entries replaced (`micro_compact` builds new dicts), never changed in place. A caller
  that changes a sent message in place must pass a new dict instead; a deep comparison of the
  whole history on every call would cost what this saves (~140 µs at 800 messages).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
from json.encoder import c_make_encoder  # type: ignore[attr-defined]  # the C encoder json itself uses
from json.encoder import encode_basestring
from typing import Any

from cyber_agent.llm.call_site import _UUID, normalise_ids
from cyber_agent.llm.replay import _default

__all__ = ["RequestCache"]

_HEAD = b'{"messages":['
_CONVERSATIONS = 4


# The encoders `json.dumps(value, **options)` would build on every call, built once (same output).
_dump = json.JSONEncoder(default=_default, ensure_ascii=False).encode
_key_dump = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
_load = json.JSONDecoder().decode


def _canonical(value: Any) -> Any:
    """What `canonical_request` makes of one value: a JSON round trip (models dumped, others as str).

    A value that is JSON already (str keys; str, int, float, bool, None, lists and dicts of them:
    every message the runner builds) is its own round trip and is returned as it is: the cache
    relies on sent messages never changing in place (see the module docstring)."""
    if _plain(value):
        return value
    return _load(_dump(value))


def _plain(value: Any) -> bool:
    """Whether a JSON round trip gives `value` back unchanged (equal, same key order, same types).

    Loops, not `all()` over generators, and leaves checked in place: it runs on every new message
    and on a run's tool list (~130 nodes), and a generator frame per node made it 2x slower."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            kind = type(item)
            if not (kind is str or kind is int or kind is bool or item is None) and not _plain(item):
                return False
        return True
    if kind is list:
        for item in value:
            kind = type(item)
            if not (kind is str or kind is int or kind is bool or item is None) and not _plain(item):
                return False
        return True
    if kind is str or kind is int or kind is bool or value is None:
        return True
    return kind is float and value - value == 0  # NaN and the infinities come back, but not equal


# `_key_dump` without `JSONEncoder.encode`'s Python layer, which builds a C encoder on every call
# (a third of a message's dump). Same options and output; no circular check: every value given is
# plain or the result of a JSON load (`_canonical`), so it has no cycle.
_key_encoder = c_make_encoder(None, None, encode_basestring, None, ":", ",", True, False, True) if c_make_encoder else None


def _key_text(value: Any) -> str:
    """The sorted, compact dump `request_key` hashes."""
    return "".join(_key_encoder(value, 0)) if _key_encoder is not None else _key_dump(value)


def _numbered_text(value: Any, numbers: dict[str, str]) -> tuple[str, bool]:
    """`_key_text(normalise_ids(value, numbers))`, and whether `value` holds a UUID; walked only when its dump holds
    something to rewrite (a tool list is ~130 JSON nodes: walking it was a tenth of a one-call run)."""
    text = _key_text(value)
    has_uuid = _UUID.search(text) is not None
    if has_uuid or "@" in text:
        text = _key_text(normalise_ids(value, numbers))
    return text, has_uuid


class _Conversation:
    """One conversation's last request, message by message."""

    __slots__ = ("canon", "counts", "hasher", "name", "numbers", "raw", "texts", "tools")

    def __init__(self) -> None:
        self.raw: list[Any] = []
        """The message objects as last passed."""
        self.canon: list[Any] = []
        """Their canonical forms (independent copies)."""
        self.texts: list[str] = []
        """Each one's normalised, sorted JSON text (what the key hashes)."""
        self.counts: list[int] = []
        """How many ids were numbered after each message."""
        self.numbers: dict[str, str] = {}
        """The numbering after the last message."""
        self.hasher = hashlib.sha256(_HEAD)
        """SHA-256 state after the last message's text."""
        self.name = ""
        """The first message's sorted JSON dump: what tells a trace's conversations apart."""
        self.tools: tuple[Any, Any, str | None, str] | None = None
        """(tools as passed, canonical tools, key text after the messages when it holds no id, model)."""

    def reuse(self, messages: list[Any]) -> int:
        """How many leading messages are the same objects as in the last request."""
        raw = self.raw
        n = min(len(messages), len(raw))
        if all(map(operator.is_, messages, raw)):  # map stops at the shorter list: no slice copies (~15% of it)
            return n
        keep = 0
        while messages[keep] is raw[keep]:
            keep += 1
        return keep

    def cut(self, keep: int) -> None:
        """Forget every message from `keep` on."""
        if keep == len(self.raw):
            return
        if not keep:
            self.name = ""
        del self.raw[keep:], self.canon[keep:], self.texts[keep:], self.counts[keep:]
        count = self.counts[-1] if self.counts else 0
        self.numbers = dict(itertools.islice(self.numbers.items(), count))
        self.hasher = hashlib.sha256(_HEAD)
        self.hasher.update(",".join(self.texts).encode())

    def extend(self, messages: list[Any]) -> None:
        """Add the messages after the kept ones."""
        for message in messages[len(self.raw):]:
            canon = _canonical(message)
            text = _key_text(canon)
            if not self.raw:
                self.name = text
            if "@" in text or _UUID.search(text):  # ids to number: walk it (most messages hold none)
                text = _key_text(normalise_ids(canon, self.numbers))
            self.hasher.update((b"," if self.texts else b"") + text.encode())
            self.raw.append(message)
            self.canon.append(canon)
            self.texts.append(text)
            self.counts.append(len(self.numbers))

    def tail(self, model: str, tools: list[dict[str, Any]] | None) -> tuple[Any, str]:
        """The canonical tools and the key text after the messages (`],"model":...,"tools":...}`)."""
        cached = self.tools
        if cached is not None and tools is cached[0] and (tools or []) == cached[1]:
            canon_tools = cached[1]
            if cached[2] is not None and cached[3] == model:
                return canon_tools, cached[2]
        else:
            canon_tools = _canonical(tools or [])
        numbers = dict(self.numbers)  # model and tools come after every message: their ids are numbered last
        model_text, _ = _numbered_text(_canonical(model), numbers)
        tools_text, tools_ids = _numbered_text(canon_tools, numbers)
        text = f'],"model":{model_text},"tools":{tools_text}}}'
        # Kept for the next call only when it holds no id (then it does not depend on the numbering).
        stable = None if _UUID.search(model) or tools_ids else text
        self.tools = (tools, canon_tools, stable, model)
        return canon_tools, text


class RequestCache:
    """Canonical requests and their keys, each message canonicalised and hashed once per conversation."""

    def __init__(self) -> None:
        self._conversations: list[_Conversation] = []

    def request(self, messages: list[dict[str, Any]], model: str,
                tools: list[dict[str, Any]] | None) -> tuple[dict[str, Any], str, str]:
        """`canonical_request(messages, model, tools)`, `request_key` of it, and the conversation's name
        (its first message's sorted dump), equal to building each whole."""
        conversation = self._pick(messages)
        conversation.cut(conversation.reuse(messages))
        conversation.extend(messages)
        canon_tools, tail = conversation.tail(model, tools)
        hasher = conversation.hasher.copy()
        hasher.update(tail.encode())
        request = {"messages": list(conversation.canon), "model": _canonical(model), "tools": canon_tools}
        return request, hasher.hexdigest(), conversation.name

    def _pick(self, messages: list[Any]) -> _Conversation:
        """The conversation whose first message this request starts with (a helper call is another), or a new one."""
        first = messages[0] if messages else None
        for i, conversation in enumerate(self._conversations):
            if conversation.canon and first is not None and first == conversation.canon[0]:
                if i:
                    self._conversations.insert(0, self._conversations.pop(i))
                return conversation
        conversation = _Conversation()
        self._conversations.insert(0, conversation)
        del self._conversations[_CONVERSATIONS:]
        return conversation
