"""Provider-neutral conversation data.

Everything here is an immutable value. Provider modules translate these to and from their
wire formats; nothing else in caliban knows what Anthropic or OpenAI put on the wire.
Tool results travel in ``user`` messages (as in the Anthropic Messages API); the OpenAI
provider turns them into ``tool`` role messages.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from caliban.util.text import encodable


@dataclass(frozen=True, kw_only=True, slots=True)
class TextPart:
    text: str

    def __post_init__(self) -> None:
        # A lone surrogate (half an emoji from a stream, bytes that are not UTF-8 on stdin,
        # an MCP result) cannot be sent or saved as UTF-8: every later request would raise.
        if isinstance(self.text, str) and (clean := encodable(self.text)) != self.text:
            object.__setattr__(self, "text", clean)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImagePart:
    """An image, base64-encoded."""

    media_type: str
    data: str


INVALID_ARGUMENTS_KEY = "_invalid_json"
"""Tool arguments that were not a JSON object arrive as ``{INVALID_ARGUMENTS_KEY: raw_text}``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """The model asking to run a tool. ``arguments`` is the decoded JSON object."""

    id: str
    name: str
    arguments: Mapping[str, Any]

    @property
    def invalid_arguments(self) -> str | None:
        """The raw text when the model's arguments were not a JSON object, else ``None``."""
        raw = self.arguments.get(INVALID_ARGUMENTS_KEY)
        return raw if isinstance(raw, str) and len(self.arguments) == 1 else None


ResultPart = TextPart | ImagePart


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    tool_call_id: str
    content: tuple[ResultPart, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingPart:
    """The model's reasoning before its answer: shown dimmed, never part of the answer's text.

    ``signature`` (a ``thinking`` block) and ``redacted_data`` (an encrypted
    ``redacted_thinking`` block) are opaque values the producing API wants back unchanged, so
    the Anthropic provider returns such a part byte for byte, and only to ``model``, the model
    that wrote it; every other model and provider leaves it out of the request. Reasoning
    from an OpenAI-compatible server has neither and is never sent back.
    """

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    model: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerToolPart:
    """A tool the provider ran itself within one response (Anthropic's web search): the call
    (a ``server_tool_use`` block) or its result (``web_search_tool_result``), kept exactly as
    the API sent it, encrypted content included, because the API wants it back unchanged.
    Only the Anthropic provider sends it; others leave it out."""

    block: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return str(self.block.get("type", ""))


Part = TextPart | ImagePart | ToolCall | ToolResult | ThinkingPart | ServerToolPart
Role = Literal["user", "assistant"]


# One random UUID per process, its last 48 bits counted up from: an id costs a counter step
# and a format, not a call to os.urandom (messages are made on every turn). The 74 random
# bits of the prefix keep the ids of different processes apart. (No at-fork reseeding: a
# handler would run in every child forked with a preexec_fn, before its exec, and
# caliban's children never make messages.)
_seed = uuid.uuid4().hex
_id_prefix = f"{_seed[:8]}-{_seed[8:12]}-{_seed[12:16]}-{_seed[16:20]}-"
_id_counter = itertools.count(int(_seed[20:], 16))


def new_message_id() -> str:
    """A new message id: a version-4 UUID string, unique across processes."""
    return f"{_id_prefix}{next(_id_counter) & 0xFFFF_FFFF_FFFF:012x}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of a conversation.

    ``id`` names it from the moment it exists, for good: transcripts keep it (``--continue``
    and ``--resume`` bring it back), stream-json frames show it (a replayed user message's
    ``uuid``), and checkpoints name a prompt by it. It takes no part in equality, and no
    provider sends it: it is caliban's, not the model's. Rebuild a message with
    ``dataclasses.replace`` to keep its id.
    """

    role: Role
    parts: tuple[Part, ...]
    id: str = field(default_factory=new_message_id, compare=False, repr=False)

    @classmethod
    def user(cls, text: str, *, id: str | None = None) -> Message:
        return cls(role="user", parts=(TextPart(text=text),), id=id or new_message_id())

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def thinking(self) -> str:
        """The readable reasoning in this message (empty for redacted blocks)."""
        return "".join(p.text for p in self.parts if isinstance(p, ThinkingPart))


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens as reported by the provider. ``input_tokens`` excludes cache reads and writes."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            cache_read_tokens=self.cache_read_tokens - other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens - other.cache_write_tokens,
        )

    @property
    def context_tokens(self) -> int:
        """Everything the model read for this request."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_tokens,
            "cache_creation_input_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A tool as offered to the model: what goes on the wire."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }
