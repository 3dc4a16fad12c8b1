"""What fills the model's context window: the data behind ``/context``.

:func:`context_report` estimates, for the request the session would send next, the tokens of
each part — the system prompt (and, with lazy MCP loading, the deferred paragraph in it), the
built-in tool definitions, the MCP tool definitions on the wire and the messages — against
the model's context window, and how much lazy loading saves: what an eager request would
carry in MCP tool definitions now versus this one. The REPL renders it (``/context``); headless
``--output-format json`` puts :meth:`ContextReport.as_dict` under ``"context"``.

Estimates are offline (:mod:`caliban.util.tokens`: ``ceil(characters / 4)`` of the text, and of
the compact JSON of each tool definition and tool call), so they are close to, not equal to,
what a provider's tokenizer counts. Where the provider reported usage for the latest request,
that figure is shown next to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from caliban.messages import (
    Usage,
)
from caliban.tools.base import McpOrigin, Tool
from caliban.util.tokens import estimate_tokens, message_tokens, tool_tokens

if TYPE_CHECKING:
    from caliban.session.session import Session
    from caliban.toolsets.base import SkillsView

__all__ = [
    "ContextReport",
    "context_report",
]


@dataclass(frozen=True, kw_only=True)
class ContextReport:
    """Token estimates of the next request, by part, and the lazy-MCP state."""

    model: str
    window: int
    """The model's context window in tokens."""
    system_tokens: int
    """The whole system prompt, deferred paragraph included."""
    deferred_paragraph_tokens: int
    builtin_tool_tokens: int
    """Built-in tool definitions (ToolSearch included)."""
    tool_search_tokens: int
    mcp_tool_tokens: int
    """MCP tool definitions on the wire."""
    message_tokens: int
    measured: int | None = None
    """Context tokens the provider reported for the latest request."""
    last_usage: Usage | None = None
    lazy: bool = False
    cap: int | None = None
    active: tuple[str, ...] = ()
    """Active lazily loaded MCP tools, most recently used first."""
    deferred_tools: int = 0
    deferred_servers: int = 0
    preactivated: tuple[tuple[str, bool], ...] = ()
    """Tools loaded for a prompt before the model saw it, each with whether it was called."""
    mcp_tools_total: int = 0
    """MCP tools this agent may use (on the wire or not)."""
    eager_mcp_tokens: int = 0
    """MCP tool definitions an eager request (lazy loading off) would carry now."""
    skills: int = 0
    """Skills and commands listed for the model (by name and description)."""
    skill_listing_tokens: int = 0
    """Their paragraph in the system prompt."""
    skill_deferred_tokens: int = 0
    """Their bodies, loaded only when the Skill tool is called."""
    estimated: bool = True

    @property
    def categories(self) -> tuple[tuple[str, int], ...]:
        """(label, tokens) in display order; free space is not a category."""
        return (
            ("System prompt", self.system_tokens),
            ("Built-in tools", self.builtin_tool_tokens),
            ("MCP tools", self.mcp_tool_tokens),
            ("Messages", self.message_tokens),
        )

    @property
    def total(self) -> int:
        return sum(tokens for _, tokens in self.categories)

    @property
    def lazy_mcp_tokens(self) -> int:
        """What MCP tools cost this request: their definitions on the wire plus, when lazy,
        the ToolSearch definition and the deferred paragraph."""
        overhead = self.tool_search_tokens + self.deferred_paragraph_tokens if self.lazy else 0
        return self.mcp_tool_tokens + overhead

    @property
    def saved_percent(self) -> float:
        """Share of the eager MCP definition tokens this request does not carry (negative
        when a small catalog costs more lazily: ToolSearch and the paragraph are not free)."""
        if self.eager_mcp_tokens <= 0:
            return 0.0
        return 100.0 * (1 - self.lazy_mcp_tokens / self.eager_mcp_tokens)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (headless ``"context"``)."""
        mcp: dict[str, Any] = {
            "lazy": self.lazy,
            "tools": self.mcp_tools_total,
            "eager_definition_tokens": self.eager_mcp_tokens,
            "request_definition_tokens": self.lazy_mcp_tokens,
            "saved_percent": round(self.saved_percent, 1),
        }
        if self.lazy:
            mcp |= {
                "active": list(self.active),
                "cap": self.cap,
                "deferred_tools": self.deferred_tools,
                "deferred_servers": self.deferred_servers,
                "preactivated": [{"name": name, "used": used} for name, used in self.preactivated],
            }
        return {
            "model": self.model,
            "context_window": self.window,
            "estimated_tokens": self.total,
            "categories": {
                "system_prompt": self.system_tokens,
                "deferred_paragraph": self.deferred_paragraph_tokens,
                "builtin_tools": self.builtin_tool_tokens,
                "mcp_tools": self.mcp_tool_tokens,
                "messages": self.message_tokens,
            },
            "last_request_tokens": self.measured,
            "mcp": mcp,
            "skills": {
                "listed": self.skills,
                "listing_tokens": self.skill_listing_tokens,
                "deferred_tokens": self.skill_deferred_tokens,
            },
        }


def context_report(session: Session) -> ContextReport:
    """Estimate what the session's next request would carry (see the module docstring)."""
    view = session.toolset.describe()
    addendum = view.addendum
    system = f"{session.system_prompt}\n\n{addendum}" if addendum else session.system_prompt
    builtin = [tool for tool in view.offered if not isinstance(tool.origin, McpOrigin)]
    on_wire = [tool for tool in view.offered if isinstance(tool.origin, McpOrigin)]
    usage = session.conversation.last_usage
    lazy = view.lazy
    skills = view.skills
    return ContextReport(
        model=session.model,
        window=session.context_window(),
        system_tokens=estimate_tokens(system),
        deferred_paragraph_tokens=estimate_tokens(_without(addendum, skills)),
        builtin_tool_tokens=tool_tokens(builtin),
        tool_search_tokens=tool_tokens([lazy.tool_search]) if lazy and lazy.deferred else 0,
        mcp_tool_tokens=tool_tokens(on_wire),
        message_tokens=sum(message_tokens(m) for m in session.conversation.messages),
        measured=usage.context_tokens if usage is not None else None,
        last_usage=usage,
        lazy=lazy is not None,
        cap=lazy.cap if lazy else None,
        active=lazy.active if lazy else (),
        deferred_tools=len(lazy.deferred) if lazy else 0,
        deferred_servers=len(_servers(lazy.deferred)) if lazy else 0,
        preactivated=lazy.preactivated if lazy else (),
        mcp_tools_total=len(view.mcp_tools),
        eager_mcp_tokens=tool_tokens(view.mcp_tools),
        skills=skills.listed if skills else 0,
        skill_listing_tokens=estimate_tokens(skills.listing) if skills else 0,
        skill_deferred_tokens=skills.deferred_tokens if skills else 0,
    )


def _without(addendum: str, skills: SkillsView | None) -> str:
    """The system-prompt addendum without the skills paragraph: the MCP deferred paragraph."""
    if skills is None or not skills.listing:
        return addendum
    return addendum.replace(skills.listing, "").strip("\n")


def _servers(tools: Sequence[Tool]) -> set[str]:
    return {tool.origin.server for tool in tools if isinstance(tool.origin, McpOrigin)}
