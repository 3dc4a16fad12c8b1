"""The bottom toolbar: model, context used, lazy-MCP activation, MCP start-up, cost."""

from __future__ import annotations

from caliban.repl.info import (
    context_used,
    context_window,
    format_cost,
    format_tokens,
    mcp_activation,
    mcp_servers,
    session_cost,
)
from caliban.session import Session


def toolbar_items(session: Session) -> list[str]:
    """The toolbar's fields, left to right."""
    window = context_window(session)
    used = context_used(session)
    if used is None:
        context = f"ctx 0/{format_tokens(window)}"
    else:
        context = f"ctx {format_tokens(used)}/{format_tokens(window)} ({used * 100 // window}%)"
    items = [session.model, context]
    if (activation := mcp_activation(session)) is not None:
        items.append(f"MCP {len(activation.active)}/{activation.cap}")
    servers = mcp_servers(session)
    pending = [s for s in servers if s.state == "connecting"]
    failed = [s for s in servers if s.state == "failed"]
    if pending:
        items.append(f"MCP servers starting {len(servers) - len(pending)}/{len(servers)}")
    if failed:
        items.append(f"{len(failed)} MCP server{'s' if len(failed) > 1 else ''} failed (/mcp)")
    if (cost := session_cost(session)) is not None:
        items.append(format_cost(cost))
    return items


def toolbar_text(session: Session, hint: str | None = None) -> str:
    """One line: ``claude-sonnet-4-5 · ctx 24.1k/200k (12%) · MCP 3/24 · $0.0123``."""
    text = " · ".join(toolbar_items(session))
    return f"{hint}   {text}" if hint else text
