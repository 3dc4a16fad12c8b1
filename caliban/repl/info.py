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

from caliban.messages import ImagePart, Message, TextPart, ToolCall, ToolResult
from caliban.pricing import cost_usd
from caliban.tokens import estimate_json_tokens, estimate_tokens

if TYPE_CHECKING:
    from caliban.agents import AgentDefinition
    from caliban.mcp.cli import StatusRow
    from caliban.session import Session

DEFAULT_CONTEXT_WINDOW = 200_000
IMAGE_TOKENS = 1_600
"""Rough tokens for one image (Anthropic bills ~1.15 megapixels at about this much)."""


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
        if (window := lookup(session.provider.name, session.model)) > 0:
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
    """The lazy-MCP activation set, or ``None`` when lazy loading is off for this session."""
    holder: Any = getattr(session, "activation", None)
    if holder is None or not getattr(session, "lazy", True):
        return None
    current = holder.get() if callable(getattr(holder, "get", None)) else holder
    return Activation(active=tuple(current.names), cap=int(current.cap))


def offered_and_deferred(session: Session) -> tuple[list[Any], int]:
    """The tools on the wire for the next request, and how many more are callable (deferred)."""
    toolbox = session.toolbox()
    offered = list(toolbox.offered())
    return offered, max(0, len(toolbox.names()) - len(offered))


# ---------------------------------------------------------------------------- /context


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextReport:
    categories: tuple[tuple[str, int], ...]
    """(label, tokens), in display order; free space is not a category."""
    window: int
    measured: int | None
    """Context tokens the provider reported at the latest request, if any."""
    estimated: bool
    activation: Activation | None = None


def context_report(session: Session) -> ContextReport:
    """What fills the context window.

    A session that can measure this itself (``session.context_report()``, with
    ``categories``, ``window`` and optionally ``measured``) is asked first; otherwise the
    parts are estimated offline with :mod:`caliban.tokens`.
    """
    own = getattr(session, "context_report", None)
    if callable(own):
        report: Any = own()
        return ContextReport(
            categories=tuple((str(label), int(n)) for label, n in report.categories),
            window=int(report.window),
            measured=getattr(report, "measured", None),
            estimated=bool(getattr(report, "estimated", False)),
            activation=mcp_activation(session),
        )
    toolbox = session.toolbox()
    system = session.system_prompt
    if addendum := toolbox.system_addendum():
        system = f"{system}\n\n{addendum}"
    builtin = mcp = 0
    for tool in toolbox.offered():
        tokens = estimate_json_tokens(tool.spec.as_dict())
        if tool.kind == "mcp":
            mcp += tokens
        else:
            builtin += tokens
    categories = [
        ("System prompt", estimate_tokens(system)),
        ("Built-in tools", builtin),
        ("MCP tools", mcp),
        ("Messages", sum(message_tokens(m) for m in session.conversation.messages)),
    ]
    return ContextReport(
        categories=tuple(categories),
        window=context_window(session),
        measured=context_used(session),
        estimated=True,
        activation=mcp_activation(session),
    )


def message_tokens(message: Message) -> int:
    """An offline estimate of one message's tokens."""
    total = 0
    for part in message.parts:
        match part:
            case TextPart(text=text):
                total += estimate_tokens(text)
            case ToolCall(name=name, arguments=arguments):
                total += estimate_tokens(name) + estimate_json_tokens(dict(arguments))
            case ToolResult(content=content):
                for item in content:
                    if isinstance(item, TextPart):
                        total += estimate_tokens(item.text)
                    else:
                        total += IMAGE_TOKENS
            case ImagePart():
                total += IMAGE_TOKENS
    return total


# ---------------------------------------------------------------------------- /config, /agents


def config_rows(session: Session) -> list[tuple[str, str, str]] | None:
    """(key, value, origin) for every setting, or ``None`` when the session has no config."""
    loaded = session.config
    if loaded is None:
        return None
    from caliban.config import _toml_value, all_keys, get_value

    rows = []
    for key in all_keys():
        value = get_value(loaded.settings, key)
        rows.append((key, "(unset)" if value is None else _toml_value(value), loaded.origin(key)))
    return rows


def agent_definitions(session: Session) -> tuple[list[AgentDefinition], list[str]]:
    """The sub-agents the ``Agent`` tool can start, and problems met reading their files."""
    from caliban.agents import list_agents

    return list_agents(session.cwd)
