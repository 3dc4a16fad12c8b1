"""History clean-up both providers need before translating to a wire format."""

from __future__ import annotations

from collections.abc import Iterable

from caliban.messages import Message, Part, TextPart, ToolResult


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
