"""History clean-up both providers need before translating to a wire format, and the
caches that translate and encode each message and tool definition once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from caliban.messages import Message, Part, TextPart, ToolResult, ToolSpec
from caliban.providers.body import Encoded, Piece, dumps

KEPT_CHUNK_CHARS: Final = 64 * 1024
"""Settled history is kept encoded once this much of it is not yet kept: the unkept rest,
encoded again each turn, stays this small."""


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


@dataclass(frozen=True, slots=True)
class _Kept:
    chunk: Encoded
    """The JSON of wire messages, each followed by a comma."""
    end: int
    """Where the next chunk's wire messages start."""


@dataclass(kw_only=True, slots=True)
class EncodedConversation:
    """One conversation's history as last encoded (:meth:`EncodedHistory.encode`)."""

    key: object
    messages: tuple[Message, ...]
    segments: list[_Segment] = field(default_factory=list)
    wire: list[WireMessage] = field(default_factory=list)
    """The history in wire form."""
    kept: list[_Kept] = field(default_factory=list)
    """The settled start of :attr:`wire` in encoded chunks, shared by successive requests."""

    def json_array(
        self, *, first: Sequence[str] = (), replaced: Mapping[int, str] | None = None
    ) -> list[Piece]:
        """The JSON array of ``first`` (JSON texts) and the wire messages, in pieces: the
        kept chunks, then the rest as text. ``replaced`` gives other JSON for some wire
        messages, by index (they stay out of kept chunks).

        The history settled before the newest run (which the next :meth:`EncodedHistory.encode`
        converts again) is kept in chunks as it grows past :data:`KEPT_CHUNK_CHARS`, so a
        request encodes and copies only the history's unkept end, whatever its length.
        """
        replaced = replaced or {}
        wire, kept = self.wire, self.kept
        settled = self.segments[-1].wire_start if self.segments else 0
        settled = min(settled, *replaced) if replaced else settled
        while kept and kept[-1].end > settled:
            kept.pop()
        start = kept[-1].end if kept else 0
        size = 0
        for end in range(start + 1, settled + 1):
            size += len(wire[end - 1].text)
            if size >= KEPT_CHUNK_CHARS:
                text = ",".join([*(m.text for m in wire[start:end]), ""])
                kept.append(_Kept(chunk=Encoded.of(text), end=end))
                _merge_last(kept)
                start, size = end, 0
        rest = [replaced.get(i) or wire[i].text for i in range(start, len(wire))]
        head = ",".join(first)
        if head and (kept or rest):
            head += ","
        return ["[" + head, *(k.chunk for k in kept), ",".join(rest) + "]"]

    def _truncate(self, wire_start: int) -> None:
        """Forget the wire messages from ``wire_start`` on (they are converted again)."""
        del self.wire[wire_start:]
        while self.kept and self.kept[-1].end > wire_start:
            self.kept.pop()


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
        self._conversations: dict[int, EncodedConversation] = {}

    def encode(
        self, messages: Sequence[Message], convert: WireConvert, *, key: object = None
    ) -> EncodedConversation:
        """``messages`` as ``convert`` translates them, normalized (the caller must change
        neither the list nor the conversation); ``key`` names what else the translation
        depends on (the model thinking blocks are kept for)."""
        history = tuple(messages)
        if not history:
            return EncodedConversation(key=key, messages=())
        conversations = self._conversations
        # Popped and put back: the dict's order is the conversations' recency.
        entry = conversations.pop(id(history[0]), None)
        known = len(entry.messages) if entry is not None else 0
        if entry is None or key != entry.key or history[:known] != entry.messages:
            entry = EncodedConversation(key=key, messages=history)
        conversations[id(history[0])] = entry  # the entry holds history[0]: the id stays its
        while len(conversations) > self.MAX_CONVERSATIONS:
            del conversations[next(iter(conversations))]
        entry.messages = history
        segments, wire = entry.segments, entry.wire
        resume = 0
        if segments:  # the newest run may have grown: converted again
            newest = segments.pop()
            entry._truncate(newest.wire_start)
            resume = newest.start
        for run_start, run_end in _role_runs(history, resume):
            converted = convert(history[run_start:run_end])
            if not converted:  # blank: its neighbours may now be of one role, and merge
                continue
            if segments and history[segments[-1].start].role == history[run_start].role:
                merged = segments.pop()
                entry._truncate(merged.wire_start)
                run_start = merged.start
                converted = convert(history[run_start:run_end])
            segments.append(_Segment(start=run_start, wire_start=len(wire)))
            wire.extend(WireMessage(data=data, text=dumps(data)) for data in converted)
        return entry


def _merge_last(kept: list[_Kept]) -> None:
    """Merge the newest chunk into the one before while that one is under twice its size,
    as a binary counter carries: each chunk is one write when the body is sent, so a long
    history goes in a few chunks (logarithmic in its length), and each byte is copied into
    a merged chunk a logarithmic number of times over the whole session."""
    while len(kept) > 1 and len(kept[-2].chunk.data) < 2 * len(kept[-1].chunk.data):
        last = kept.pop()
        before = kept.pop()
        merged = Encoded(
            data=before.chunk.data + last.chunk.data, chars=before.chunk.chars + last.chunk.chars
        )
        kept.append(_Kept(chunk=merged, end=last.end))


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
        self._joined = Encoded.of("")

    def encode(self, specs: Sequence[ToolSpec]) -> Encoded:
        """The definitions of ``specs``, comma-separated (a JSON array's inside)."""
        current = tuple(specs)
        if current == self._specs:  # identity first: a C-speed check
            return self._joined
        known = self._texts
        used: dict[int, tuple[ToolSpec, str]] = {}
        for spec in current:
            used[id(spec)] = known.get(id(spec)) or (spec, dumps(self._convert(spec)))
        self._specs, self._texts = current, used
        self._joined = Encoded.of(",".join(used[id(spec)][1] for spec in current))
        return self._joined
