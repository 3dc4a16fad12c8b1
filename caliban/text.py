"""Small helpers for the sentences caliban writes."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate (``\\ud83d`` from half an emoji in a JSON stream,
    bytes that are not UTF-8 read from stdin) replaced by U+FFFD, so it can be written as
    UTF-8: such a character made every write of it raise."""
    return _SURROGATE.sub("\ufffd", text)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 line``, ``3 lines``, ``1,200 tools``; ``many`` for irregular plurals (``matches``)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"
