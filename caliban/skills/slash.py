"""Recognising ``/name args`` (kept apart so the REPL can parse without loading the catalog)."""

from __future__ import annotations

import re

_SLASH = re.compile(r"/([A-Za-z][\w:.-]*)(?:\s+(.*))?", re.DOTALL)


def parse_slash(text: str) -> tuple[str, str] | None:
    """``"/review  src/a.py"`` → ``("review", "src/a.py")``; ``None`` when ``text`` is not a
    slash command (a path such as ``/etc/hosts is wrong`` is not one)."""
    match = _SLASH.fullmatch(text.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


__all__ = ["parse_slash"]
