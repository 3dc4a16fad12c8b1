"""Small helpers for the sentences caliban writes."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 line``, ``3 lines``, ``1,200 tools``; ``many`` for irregular plurals (``matches``)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"
