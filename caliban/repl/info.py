"""What the REPL's toolbar and slash commands show about a session.

Small accessors over the session, so a command never digs through it; where data is not
available they say so (``None`` or an empty list) rather than inventing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caliban.mcp.status import StatusRow
    from caliban.session.session import Session
    from caliban.subagents import AgentDefinition


def format_cost(usd: float | None) -> str:
    if usd is None:
        return "n/a"
    return f"${usd:.4f}" if usd < 1 else f"${usd:.2f}"


def context_used(session: Session) -> int | None:
    """Tokens the model read at the latest request, as the provider reported them."""
    usage = session.conversation.last_usage
    return usage.context_tokens if usage is not None else None


def session_cost(session: Session) -> float | None:
    """What this session's requests have cost so far, in USD, each at the price of the model
    that served it (``None``: a price is unknown)."""
    return session.ledger.cost_usd()


def mcp_servers(session: Session) -> list[StatusRow]:
    """Configured MCP servers and their state; empty when the session has no MCP manager."""
    if session.mcp is None:
        return []
    from caliban.mcp.status import manager_rows

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


def config_rows(session: Session) -> list[tuple[str, str, str]] | None:
    """(key, value, origin) for every setting, or ``None`` when the session has no config."""
    loaded = session.config
    if loaded is None:
        return None
    from caliban.config.settings import all_keys, get_value, toml_value

    rows = []
    for key in all_keys():
        value = get_value(loaded.settings, key)
        rows.append((key, "(unset)" if value is None else toml_value(value), loaded.origin(key)))
    return rows


def agent_definitions(session: Session) -> tuple[list[AgentDefinition], list[str]]:
    """The sub-agents the ``Agent`` tool can start, and problems met reading their files."""
    from caliban.subagents import list_agents

    return list_agents(session.cwd)
