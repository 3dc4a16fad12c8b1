"""Which MCP servers ``caliban -p`` waits for before its first request, and for how long.

Claude Code's rules (2.1.197, headless): servers connect in the background and the first
request goes with the tools listed by then; only servers marked ``alwaysLoad`` (caliban's
``lazy = false``) are waited for, at most ``MCP_CONNECT_TIMEOUT_MS`` (5 s). With
``MCP_CONNECTION_NONBLOCKING`` set to a false value (``0``, ``false``, ``no``, ``off``)
every server is waited for, within the same window. caliban waits only for servers whose
tools are not known: a cached tool list is announced at once whatever the rule.
``tools.wait_for_mcp = true`` brings back caliban's earlier wait: every server whose tools
are not known, each within its own ``startup_timeout``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from caliban.mcp.config import connect_window

if TYPE_CHECKING:
    from caliban.mcp.client import McpManager

__all__ = ["FirstRequestWait", "first_request_wait"]

_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True, kw_only=True, slots=True)
class FirstRequestWait:
    servers: tuple[str, ...]
    """The servers waited for (launched at once)."""
    timeout: float | None
    """The whole wait's bound; ``None``: each server's own ``startup_timeout``."""


def first_request_wait(
    manager: McpManager, *, wait_for_all: bool, environ: Mapping[str, str]
) -> FirstRequestWait:
    """What the first request of a headless run waits for (see the module docstring)."""
    unlisted = manager.unlisted()
    if wait_for_all:
        return FirstRequestWait(servers=unlisted, timeout=None)
    blocking = environ.get("MCP_CONNECTION_NONBLOCKING", "").strip().lower() in _FALSE
    servers = (
        unlisted if blocking else tuple(name for name in unlisted if _always_loaded(manager, name))
    )
    return FirstRequestWait(servers=servers, timeout=connect_window())


def _always_loaded(manager: McpManager, name: str) -> bool:
    config = manager.server_config(name)
    return config is not None and config.lazy is False
