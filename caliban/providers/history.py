"""History clean-up both providers need before translating to a wire format, and the
caches that translate and encode each message and tool definition once."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from caliban.messages import Message, Part, TextPart, ToolResult, ToolSpec


def normalize(messages: Iterable[Message]) -> list[Message]:
    """Drop empty text and empty messages, and merge consecutive messages of one role.

    A cancelled turn can leave two user messages in a row (the interrupted tool results,
    then the next prompt), and both APIs want roles to alternate. In a merged user message
    tool results come first, because they must directly follow the assistant's tool calls.
    """
    merged: list[Message] = []
    for message in messages:
        parts = tuple(p for p in message.parts if not _blank(p))
        if not parts:
            continue
        if merged and merged[-1].role == message.role:
            parts = merged.pop().parts + parts
        if message.role == "user":
            parts = _results_first(parts)
        merged.append(Message(role=message.role, parts=parts))
    return merged


def _results_first(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    results = [p for p in parts if isinstance(p, ToolResult)]
    if not results or len(results) == len(parts):
        return parts
    return (*results, *(p for p in parts if not isinstance(p, ToolResult)))


def _blank(part: Part) -> bool:
    return isinstance(part, TextPart) and not part.text.strip()


def dumps(value: object) -> str:
    """Compact JSON, as the SDKs encode a request body (UTF-8, no ASCII escapes)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_object(fields: Iterable[tuple[str, str]]) -> str:
    """A JSON object from keys and values already encoded as JSON."""
    return "{" + ",".join(f"{dumps(key)}:{value}" for key, value in fields) + "}"


@dataclass(frozen=True, slots=True)
class WireMessage:
    """One message in a provider's wire form, and its JSON."""

    data: Mapping[str, Any]
    text: str


WireConvert = Callable[[Sequence[Message]], list[dict[str, Any]]]
"""A provider's translation of one run of same-role messages (already filtered and merged by
:func:`normalize`, which it calls) into wire messages."""


@dataclass(frozen=True, slots=True)
class _Segment:
    start: int
    """Where its messages start in the history."""
    wire_start: int
    """Where its wire messages start in the wire list."""


@dataclass(kw_only=True, slots=True)
class _Encoded:
    """One conversation's history as last encoded."""

    key: object
    messages: tuple[Message, ...]
    segments: list[_Segment]
    wire: list[WireMessage]


class EncodedHistory:
    """Conversations' messages in wire form, each converted and JSON-encoded once.

    A request carries the whole history, so translating and encoding all of it every turn
    makes a long session cost more per turn the longer it gets. Messages are frozen values
    a conversation appends to, so when a request's history starts with the previous
    request's (the same objects: a C-speed identity check), only what follows the previous
    newest run of one role is converted, and that run again, as it may have grown. Any
    other history (compaction, a rewind, another model) is converted afresh. Sub-agents
    share their parent's provider: each conversation, told apart by its first message, has
    its own entry (the most recent few are kept).
    """

    MAX_CONVERSATIONS = 8

    def __init__(self) -> None:
        self._conversations: dict[int, _Encoded] = {}

    def encode(
        self, messages: Sequence[Message], convert: WireConvert, *, key: object = None
    ) -> list[WireMessage]:
        """``messages`` as ``convert`` translates them, normalized (the caller must not
        change the list); ``key`` names what else the translation depends on (the model
        thinking blocks are kept for)."""
        history = tuple(messages)
        if not history:
            return []
        conversations = self._conversations
        # Popped and put back: the dict's order is the conversations' recency.
        entry = conversations.pop(id(history[0]), None)
        known = len(entry.messages) if entry is not None else 0
        if entry is None or key != entry.key or history[:known] != entry.messages:
            entry = _Encoded(key=key, messages=history, segments=[], wire=[])
        conversations[id(history[0])] = entry  # the entry holds history[0]: the id stays its
        while len(conversations) > self.MAX_CONVERSATIONS:
            del conversations[next(iter(conversations))]
        entry.messages = history
        segments, wire = entry.segments, entry.wire
        resume = 0
        if segments:  # the newest run may have grown: converted again
            newest = segments.pop()
            del wire[newest.wire_start :]
            resume = newest.start
        for run_start, run_end in _role_runs(history, resume):
            converted = convert(history[run_start:run_end])
            if not converted:  # blank: its neighbours may now be of one role, and merge
                continue
            if segments and history[segments[-1].start].role == history[run_start].role:
                merged = segments.pop()
                del wire[merged.wire_start :]
                run_start = merged.start
                converted = convert(history[run_start:run_end])
            segments.append(_Segment(start=run_start, wire_start=len(wire)))
            wire.extend(WireMessage(data=data, text=dumps(data)) for data in converted)
        return wire


def _role_runs(messages: Sequence[Message], start: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run of consecutive same-role messages from ``start``."""
    first = start
    for index in range(start + 1, len(messages) + 1):
        if index == len(messages) or messages[index].role != messages[first].role:
            yield first, index
            first = index


class EncodedTools:
    """Tool definitions in wire form, encoded once each (a spec is a frozen value its tool
    keeps); the same tool list as the previous request's costs nothing."""

    def __init__(self, convert: Callable[[ToolSpec], dict[str, Any]]) -> None:
        self._convert = convert
        self._specs: tuple[ToolSpec, ...] = ()
        self._texts: dict[int, tuple[ToolSpec, str]] = {}
        self._joined = ""

    def encode(self, specs: Sequence[ToolSpec]) -> str:
        """The definitions of ``specs``, comma-separated (a JSON array's inside)."""
        current = tuple(specs)
        if current == self._specs:  # identity first: a C-speed check
            return self._joined
        known = self._texts
        used: dict[int, tuple[ToolSpec, str]] = {}
        for spec in current:
            used[id(spec)] = known.get(id(spec)) or (spec, dumps(self._convert(spec)))
        self._specs, self._texts = current, used
        self._joined = ",".join(used[id(spec)][1] for spec in current)
        return self._joined
