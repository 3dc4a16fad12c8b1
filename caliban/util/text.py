"""Small helpers for the sentences caliban writes."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (``\\ud83d`` from half an emoji in a JSON stream,
    bytes that are not UTF-8 read from stdin) replaced by U+FFFD, so it can be written as
    UTF-8: such a character made every write of it raise."""
    return _SURROGATE.sub("\ufffd", text)


_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def visible(text: str) -> str:
    """``text`` for a terminal, each control character (ESC, carriage return…) and
    invisible or direction-changing Unicode character written as its escape (``\\x1b``,
    ``\\u202e``); tabs and newlines stay. What a command, a file or a model wrote cannot
    then hide part of itself, or recolour the screen, where the user reads it."""
    return _INVISIBLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 line``, ``3 lines``, ``1,200 tools``; ``many`` for irregular plurals (``matches``)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def clipped(text: str, limit: int) -> str:
    """``text`` cut after ``limit`` characters, with a note of how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"
