"""The bottom toolbar: permission mode, model, context used, lazy-MCP activation, MCP
start-up, cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from caliban.repl.info import (
    context_used,
    format_cost,
    mcp_activation,
    mcp_servers,
    session_cost,
)
from caliban.util.text import visible
from caliban.util.tokens import format_tokens

if TYPE_CHECKING:
    from caliban.session.session import Session


MODE_LABELS = {
    "acceptEdits": "⏵⏵ accept edits on",
    "plan": "⏸ plan mode on",
    "bypassPermissions": "⚠ bypass permissions on",
}
"""How the toolbar shows a permission mode other than the default."""


def toolbar_items(session: Session) -> list[str]:
    """The toolbar's fields, left to right."""
    window = session.context_window()
    used = context_used(session)
    if used is None:
        context = f"ctx 0/{format_tokens(window)}"
    else:
        context = f"ctx {format_tokens(used)}/{format_tokens(window)} ({used * 100 // window}%)"
    items = [session.model, context]
    mode = session.permissions.mode if session.permissions is not None else "default"
    if label := MODE_LABELS.get(mode):
        items.insert(0, f"{label} (shift-tab to cycle)")
    if (activation := mcp_activation(session)) is not None:
        items.append(f"MCP {len(activation.active)}/{activation.cap}")
    servers = [s for s in mcp_servers(session) if s.state != "disabled"]
    if servers:
        connected = sum(s.state == "connected" for s in servers)
        text = f"servers {connected}/{len(servers)}"
        if any(s.state == "connecting" for s in servers):
            text += " starting…"
        if failed := sum(s.state == "failed" for s in servers):
            text += f" ({failed} failed: /mcp)"
        items.append(text)
    if (cost := session_cost(session)) is not None:
        items.append(format_cost(cost))
    return items


def toolbar_text(session: Session, hint: str | None = None) -> str:
    """One line: ``claude-sonnet-4-5 · ctx 24.1k/200k (12%) · MCP 3/24 · servers 5/5 · $0.0123``.

    ``MCP 3/24`` (active/cap) shows while lazy MCP loading is on. The model's name comes
    from settings a cloned project may hold, so the line is made :func:`visible`.
    """
    text = visible(" · ".join(toolbar_items(session)))
    return f"{hint}   {text}" if hint else text
