"""What the REPL shows about a session, read through small accessors.

The toolbar and the slash commands ask these functions, never the session's internals
directly, so a session attribute that appears later (per-server MCP status, the lazy-MCP
activation set, a measured context report) is wired in here, in one place. Where data is
not available the accessors say so (``None`` or an empty list) rather than inventing it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from caliban.pricing import cost_usd

if TYPE_CHECKING:
    from caliban.agents import AgentDefinition
    from caliban.context import ContextReport
    from caliban.mcp.cli import StatusRow
    from caliban.session import Session

DEFAULT_CONTEXT_WINDOW = 200_000


def format_tokens(n: int) -> str:
    """``1234`` → ``1.2k``; ``1234567`` → ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return f"{n / 1_000_000:.1f}".removesuffix(".0") + "M"


def format_cost(usd: float | None) -> str:
    if usd is None:
        return "n/a"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


# ---------------------------------------------------------------------------- model and usage


def context_window(session: Session) -> int:
    """The model's context window in tokens (200k when the provider module cannot say)."""
    from caliban.providers.select import context_window as lookup

    with contextlib.suppress(Exception):
        if (window := lookup(session.provider, session.model)) > 0:
            return window
    return DEFAULT_CONTEXT_WINDOW


def context_used(session: Session) -> int | None:
    """Tokens the model read at the latest request, as the provider reported them."""
    usage = session.conversation.last_usage
    return usage.context_tokens if usage is not None else None


def session_cost(session: Session) -> float | None:
    """What this session's conversation has cost so far, in USD (``None``: unknown price)."""
    return cost_usd(session.model, session.conversation.usage)


# ---------------------------------------------------------------------------- MCP


def mcp_servers(session: Session) -> list[StatusRow]:
    """Configured MCP servers and their state; empty when the session has no MCP manager."""
    if session.mcp is None:
        return []
    from caliban.mcp.cli import manager_rows

    return manager_rows(session.mcp)


@dataclass(frozen=True, kw_only=True, slots=True)
class Activation:
    active: tuple[str, ...]
    cap: int


def mcp_activation(session: Session) -> Activation | None:
    """The lazy-MCP activation set, or ``None`` while lazy loading is off."""
    if session.activation is None or not session.lazy:
        return None
    current = session.activation.get()
    return Activation(active=current.names(), cap=current.cap)


def offered_and_deferred(session: Session) -> tuple[list[Any], int]:
    """The tools on the wire for the next request, and how many more are callable (deferred)."""
    toolbox = session.toolbox()
    offered = list(toolbox.offered())
    return offered, max(0, len(toolbox.names()) - len(offered))


# ---------------------------------------------------------------------------- /context


def context_report(session: Session) -> ContextReport:
    """What fills the context window of the next request (``caliban.context``)."""
    return session.context_report()


# ---------------------------------------------------------------------------- /config, /agents


def config_rows(session: Session) -> list[tuple[str, str, str]] | None:
    """(key, value, origin) for every setting, or ``None`` when the session has no config."""
    loaded = session.config
    if loaded is None:
        return None
    from caliban.config import all_keys, get_value, toml_value

    rows = []
    for key in all_keys():
        value = get_value(loaded.settings, key)
        rows.append((key, "(unset)" if value is None else toml_value(value), loaded.origin(key)))
    return rows


def agent_definitions(session: Session) -> tuple[list[AgentDefinition], list[str]]:
    """The sub-agents the ``Agent`` tool can start, and problems met reading their files."""
    from caliban.agents import list_agents

    return list_agents(session.cwd)
