"""Reading nested settings tables by dotted key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["dotted_get"]


def dotted_get(table: Mapping[str, Any], key: str) -> Any:
    """``table``'s value at dotted ``key`` (``"network.allowedDomains"``), or None when a
    part is missing or not a table."""
    node: Any = table
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node
